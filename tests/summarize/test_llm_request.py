"""What the LLM summariser sends upstream and how it reads the answer (against the fake upstream)."""

from __future__ import annotations

from typing import Any

import pytest

from ctxproxy.summarize import SummaryTask
from ctxproxy.tokens import TokenCounter
from ctxproxy.upstream.client import UpstreamHttp
from tests.fakes.upstream import FakeUpstream
from tests.summarize.factories import assistant, make_llm, user
from tests.summarize.test_answer_shapes import SHAPES

ANSWER = "### Goal\n- Plan a trip to Lisbon.\n\n### Key facts\n- Ana: the hotel is near the Tejo."
CHAT = [user("Plan a trip to Lisbon for me.", name="Ana"), assistant("Sure, the hotel is near the Tejo.")]


async def test_request_body_and_headers(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json(ANSWER)
    result = await make_llm(upstream_http, base_url, counter).summarize(SummaryTask("fresh", CHAT, max_tokens=321))
    assert result.summarizer == "llm"
    assert result.text == ANSWER
    [request] = upstream.chat_requests()
    assert request.headers["Authorization"] == "Bearer sk-sum"
    body: dict[str, Any] = request.json()
    assert body["model"] == "summary-mini"
    assert body["temperature"] == 0
    assert body["max_tokens"] == 321
    assert "stream" not in body
    system, prompt = body["messages"]
    assert (system["role"], prompt["role"]) == ("system", "user")
    assert "### <name>" in system["content"] and "321 tokens" in system["content"]
    assert prompt["content"].startswith("Summarise the conversation below.")
    assert (
        "[user: Ana] Plan a trip to Lisbon for me.\n\n[assistant] Sure, the hotel is near the Tejo."
        in prompt["content"]
    )


async def test_update_prompt_contains_the_previous_summary(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json(ANSWER)
    previous = "### Goal\n- Plan a trip to Lisbon.\n\n### Constraints\n- Budget under 2000 euros."
    await make_llm(upstream_http, base_url, counter).summarize(SummaryTask("update", CHAT, previous))
    prompt = upstream.chat_requests()[0].json()["messages"][1]["content"]
    assert prompt.startswith("Update the existing summary")
    assert f"<previous-summary>\n{previous}\n</previous-summary>" in prompt


async def test_split_turn_prompt(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json(ANSWER)
    await make_llm(upstream_http, base_url, counter).summarize(SummaryTask("split_turn", CHAT))
    prompt = upstream.chat_requests()[0].json()["messages"][1]["content"]
    assert "continues after this cut" in prompt and "<turn-start>" in prompt


async def test_client_authorization_is_used_without_a_tenant_key(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json(ANSWER)
    upstream.reply_json(ANSWER)
    await make_llm(upstream_http, base_url, counter, api_key=None, authorization="Bearer sk-client").summarize(
        SummaryTask("fresh", CHAT)
    )
    await make_llm(upstream_http, base_url, counter, api_key="sk-sum", authorization="Bearer sk-client").summarize(
        SummaryTask("fresh", CHAT)
    )
    first, second = upstream.chat_requests()
    assert first.headers["Authorization"] == "Bearer sk-client"
    assert second.headers["Authorization"] == "Bearer sk-sum"  # the tenant's key wins


async def test_tenant_extra_headers_are_sent(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json(ANSWER)
    await make_llm(upstream_http, base_url, counter, headers={"OpenAI-Organization": "org-1"}).summarize(
        SummaryTask("fresh", CHAT)
    )
    assert upstream.chat_requests()[0].headers["OpenAI-Organization"] == "org-1"


async def test_answer_is_normalised(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json(
        "```markdown\n## Context Summary\n\n### Key Facts\n* Ana likes trams.\n### Goal\n- Plan a trip.\n### Files\nRead: invented.py\n```"
    )
    task = SummaryTask("fresh", CHAT, files_read=("itinerary.md",), files_modified=("budget.xlsx",))
    result = await make_llm(upstream_http, base_url, counter).summarize(task)
    assert result.summarizer == "llm"
    assert result.text == (
        "### Goal\n- Plan a trip.\n\n### Key facts\n- Ana likes trams.\n\n### Files\nRead: itinerary.md\nModified: budget.xlsx"
    )
    prompt = upstream.chat_requests()[0].json()["messages"][1]["content"]
    assert "Files read so far: itinerary.md" in prompt


async def test_an_over_long_answer_is_trimmed_to_max_tokens(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    facts = "\n".join(f"- Fact {i}: the service handles {i * 100} requests per second at peak." for i in range(80))
    upstream.reply_json(f"### Goal\n- Keep the service fast.\n\n### Key facts\n{facts}\n\n### Decisions\n- Use Redis.")
    result = await make_llm(upstream_http, base_url, counter).summarize(SummaryTask("fresh", CHAT, max_tokens=200))
    assert result.summarizer == "llm"
    assert counter.count_text(result.text) <= 200
    assert "- Fact 0: the service handles 0 requests per second at peak." in result.text  # the end goes first
    assert "Fact 79" not in result.text
    assert "### Goal\n- Keep the service fast." in result.text and "- Use Redis." in result.text


async def test_update_carries_the_previous_files_over(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json("### Goal\n- Refactor the lexer.")
    previous = "### Goal\n- Refactor the parser.\n\n### Files\nRead: parser.py\nModified: ast.py"
    task = SummaryTask("update", CHAT, previous, files_read=("lexer.py",), files_modified=("ast.py",))
    result = await make_llm(upstream_http, base_url, counter).summarize(task)
    assert result.text == "### Goal\n- Refactor the lexer.\n\n### Files\nRead: parser.py, lexer.py\nModified: ast.py"


async def test_system_messages_are_not_sent_and_a_range_of_only_them_makes_no_call(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json(ANSWER)
    system = {"role": "developer", "content": "Secret rules: never mention the moon."}
    await make_llm(upstream_http, base_url, counter).summarize(SummaryTask("fresh", [system, *CHAT]))
    assert "moon" not in upstream.chat_requests()[0].json()["messages"][1]["content"]
    result = await make_llm(upstream_http, base_url, counter).summarize(SummaryTask("fresh", [system]))
    assert len(upstream.chat_requests()) == 1 and result.summarizer == "extractive"


@pytest.mark.parametrize("shape", ["h2 headings", "bold labels leading text", "json object", "plain prose"])
async def test_an_answer_in_another_shape_is_used_not_thrown_away(
    shape: str, fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json(SHAPES[shape].answer)
    result = await make_llm(upstream_http, base_url, counter).summarize(SummaryTask("fresh", CHAT))
    assert result.summarizer == "llm"
    for texts in SHAPES[shape].found.values():
        assert all(text in result.text for text in texts)

"""What the model is sent to summarise an agent session: the work, without the client's scaffolding.

The fake upstream records the summary request; its transcript must hold the user's requests and
the tool round trips and none of what Claude Code or Codex repeat every turn — for the range
summary, the Contents Page lines and the per-round notes alike.
"""

from __future__ import annotations

import orjson

from ctxproxy.summarize import SECTIONS, SummaryTask
from ctxproxy.summarize.extractive import ExtractiveSummarizer
from ctxproxy.summarize.pagelines import extractive_page_lines, llm_page_lines
from ctxproxy.summarize.round_notes import llm_round_notes
from ctxproxy.tokens import TokenCounter
from ctxproxy.upstream.client import UpstreamHttp
from tests.fakes.upstream import FakeUpstream
from tests.summarize.agent_sessions import (
    CODEX_REQUEST,
    HOUSE_RULES,
    REQUEST,
    SECOND_REQUEST,
    claude_code_session,
    codex_session,
)
from tests.summarize.factories import completion_client, make_llm, section
from tests.summarize.test_extractive_agents import assert_no_scaffolding

ANSWER = (
    "### Goal\n- Count the ERROR lines.\n\n### Commands\n- `grep -c ERROR a.log` → 42\n\n### Files\n- Read: made-up.py"
)


def first_turn() -> list[dict[str, object]]:
    session = claude_code_session()
    return session[
        : next(i for i, m in enumerate(session) if i > 1 and m["role"] == "user" and "tool_call_id" not in m)
    ]


async def test_the_transcript_holds_the_work_and_no_scaffolding(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json(ANSWER)
    result = await make_llm(upstream_http, base_url, counter).summarize(SummaryTask("fresh", claude_code_session()))
    assert result.summarizer == "llm"
    system, prompt = upstream.chat_requests()[0].json()["messages"]
    transcript = prompt["content"].split("<conversation>\n", 1)[1]
    assert transcript.startswith(f"[user] {REQUEST}\n\n")
    assert '[assistant → tool Bash] {"command":"grep -c ERROR a.log"' in transcript
    assert "[tool result] 42" in transcript
    assert f"[user] {SECOND_REQUEST}" in transcript
    assert_no_scaffolding(prompt["content"])
    assert "Files read so far: a.log" in prompt["content"]  # the range's own tool calls
    assert "Files modified so far: /work/logs/count.py" in prompt["content"]
    assert all(f". {name}:" in system["content"] for name in SECTIONS)  # Requests, Commands, Errors asked for
    # not the model's; the failed read's file is only seen (and nothing from the scaffolding)
    files = ["Read: a.log", "Modified: /work/logs/count.py", "Seen: /work/logs/missing.py"]
    assert section(result.text, "Files") == files


async def test_a_codex_transcript(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json(ANSWER)
    await make_llm(upstream_http, base_url, counter).summarize(SummaryTask("fresh", codex_session()))
    prompt = upstream.chat_requests()[0].json()["messages"][1]["content"]
    assert prompt.split("<conversation>\n", 1)[1].startswith(f"[user] {CODEX_REQUEST}\n\n")
    assert "Process exited with code 1" in prompt  # tool output is the model's to read
    assert_no_scaffolding(prompt)


async def test_page_lines_and_round_notes_without_scaffolding(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp
) -> None:
    page = first_turn()
    lines = extractive_page_lines(page)
    assert lines.summary == f"User: {REQUEST}"
    assert_no_scaffolding(" ".join([lines.summary, *lines.lines]))
    upstream, base_url = fake
    entries = len(lines.lines) + 1
    upstream.reply_json(orjson.dumps({"pages": [{"summary": "s", "lines": ["l"] * entries}]}).decode())
    upstream.reply_json('{"user": [], "project": ["log A has 42 ERROR lines"]}')
    client = completion_client(upstream_http, base_url)
    assert await llm_page_lines(client, "summary-mini", [page]) is not None
    assert await llm_round_notes(client, "summary-mini", page) is not None
    for request in upstream.chat_requests():
        prompt = request.json()["messages"][1]["content"]
        assert REQUEST in prompt
        assert_no_scaffolding(prompt)


async def test_the_extractive_summarisers_kept_scans_send_the_model_the_same_transcript(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    """Given the extractive summariser's scans (as the engine gives it), the LLM summariser sends
    what it sends reading the whole history itself, summary after summary of a growing session
    whose turns repeat the client's scaffolding (Codex's, then Claude Code's, copied: new objects)."""
    upstream, base_url = fake
    session = [*codex_session(), *(dict(m) for m in claude_code_session()), *(dict(m) for m in codex_session())]
    kept = make_llm(upstream_http, base_url, counter, repeated=ExtractiveSummarizer(counter).repeated)
    plain = make_llm(upstream_http, base_url, counter)
    ranges = []
    for end in range(4, len(session) + 1, 5):
        task = SummaryTask("fresh", session[max(0, end - 6) : end], context=session[: end + 1])
        ranges.append(str(task.messages))
        for summarizer in (kept, plain):
            upstream.reply_json(ANSWER)
            assert (await summarizer.summarize(task)).summarizer == "llm"
    sent = [str(request.json()["messages"]) for request in upstream.chat_requests()]
    assert len(sent) > 4 and sent[0::2] == sent[1::2]
    # a repeated paragraph of the range is not the model's to read
    assert any(HOUSE_RULES in told and HOUSE_RULES not in asked for told, asked in zip(ranges, sent[0::2], strict=True))

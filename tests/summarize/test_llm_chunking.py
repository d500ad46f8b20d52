"""Inputs larger than the summary model's window are summarised in chunks, folded with `update`."""

from __future__ import annotations

from structlog.testing import capture_logs

from ctxproxy.summarize import SummaryTask
from ctxproxy.tokens import TokenCounter
from ctxproxy.upstream.client import UpstreamHttp
from tests.fakes.upstream import FakeUpstream
from tests.summarize.factories import assistant, make_llm, user

WINDOW = 900
MAX_TOKENS = 100


def long_chat(n: int = 40) -> list[dict[str, object]]:
    return [
        (user if i % 2 == 0 else assistant)(
            f"Message {i:02d}: the migration of service number {i} to the new cluster needs a careful rollout plan."
        )
        for i in range(n)
    ]


async def test_a_long_input_is_summarised_in_chunks(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    for step in range(1, 30):
        upstream.reply_json(f"### Goal\n- Migrate the services.\n\n### Background\n- step {step} done")
    chat = long_chat()
    summarizer = make_llm(upstream_http, base_url, counter, context_window=WINDOW)
    result = await summarizer.summarize(SummaryTask("fresh", chat, max_tokens=MAX_TOKENS))

    requests = upstream.chat_requests()
    assert len(requests) >= 3
    assert result.summarizer == "llm"
    assert result.text == f"### Goal\n- Migrate the services.\n\n### Background\n- step {len(requests)} done"
    prompts = [r.json()["messages"][1]["content"] for r in requests]
    assert prompts[0].startswith("Summarise the conversation below.")
    for number, prompt in enumerate(prompts[1:], 1):
        assert prompt.startswith("Update the existing summary")
        assert (
            f"<previous-summary>\n### Goal\n- Migrate the services.\n\n### Background\n- step {number} done\n" in prompt
        )
    # Every message is in exactly one chunk, in order, and every call fits the window.
    for i in range(len(chat)):
        assert sum(f"Message {i:02d}:" in prompt for prompt in prompts) == 1
    order = [next(n for n, p in enumerate(prompts) if f"Message {i:02d}:" in p) for i in range(len(chat))]
    assert order == sorted(order)
    for request in requests:
        body = request.json()
        prompt_tokens = sum(counter.count_text(m["content"]) + 4 for m in body["messages"])
        assert prompt_tokens + body["max_tokens"] <= WINDOW


async def test_an_update_task_starts_from_its_previous_summary(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    for step in range(1, 30):
        upstream.reply_json(f"### Goal\n- Migrate.\n\n### Background\n- step {step}")
    previous = "### Goal\n- Migrate.\n\n### Decisions\n- Use blue-green deploys."
    await make_llm(upstream_http, base_url, counter, context_window=WINDOW).summarize(
        SummaryTask("update", long_chat(), previous, max_tokens=MAX_TOKENS)
    )
    prompts = [r.json()["messages"][1]["content"] for r in upstream.chat_requests()]
    assert len(prompts) >= 2
    assert "- Use blue-green deploys." in prompts[0]
    assert "- Use blue-green deploys." not in prompts[1] and "- step 1" in prompts[1]


async def test_a_single_huge_message_is_cut_to_fit_a_chunk(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json("### Goal\n- Read the log.")
    result = await make_llm(upstream_http, base_url, counter, context_window=WINDOW).summarize(
        SummaryTask("fresh", [user("error line " * 2000)], max_tokens=MAX_TOKENS)
    )
    assert result.summarizer == "llm"
    [request] = upstream.chat_requests()
    body = request.json()
    assert "… [truncated" in body["messages"][1]["content"]
    assert sum(counter.count_text(m["content"]) for m in body["messages"]) + MAX_TOKENS <= WINDOW


async def test_a_window_too_small_for_any_chunk_falls_back(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    with capture_logs() as logs:
        result = await make_llm(upstream_http, base_url, counter, context_window=300).summarize(
            SummaryTask("fresh", long_chat(4))
        )
    assert result.summarizer == "extractive" and result.text
    assert upstream.chat_requests() == []
    assert [e["reason"] for e in logs if e["event"] == "summary.llm_fallback"] == ["window_too_small"]


async def test_more_chunks_than_allowed_falls_back(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    summarizer = make_llm(upstream_http, base_url, counter, api_key=None, context_window=WINDOW, max_chunks=2)
    with capture_logs() as logs:
        result = await summarizer.summarize(SummaryTask("fresh", long_chat(), max_tokens=MAX_TOKENS))
    assert result.summarizer == "extractive" and result.text
    assert upstream.chat_requests() == []  # decided before any call
    assert [e["reason"] for e in logs if e["event"] == "summary.llm_fallback"] == ["too_many_chunks"]

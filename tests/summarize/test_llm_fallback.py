"""Every way the LLM summary can fail ends in the extractive summary and one warning."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest
from structlog.testing import capture_logs

from ctxproxy.summarize import ExtractiveSummarizer, SummaryTask
from ctxproxy.tokens import TokenCounter
from ctxproxy.upstream.client import UpstreamHttp
from tests.fakes.upstream import FakeUpstream, openai_error
from tests.summarize.factories import assistant, make_llm, user

SECRET_TEXT = "zebra-quasar-7781 is the vault code"
TASK = SummaryTask(
    "fresh",
    [user(f"Please remember that {SECRET_TEXT}. We must rotate it monthly."), assistant("Noted, I will remind you.")],
)

SCENARIOS: dict[str, tuple[str, Callable[[FakeUpstream], None]]] = {
    "upstream_http 500": ("status", lambda f: f.reply_error(500, openai_error("boom", type="server_error"))),
    "upstream_http 429": ("status", lambda f: f.reply_error(429, openai_error("slow down", type="rate_limit_error"))),
    "timeout": ("timeout", lambda f: f.reply_delay(2.0)),
    "empty content": ("empty_content", lambda f: f.reply_json("   ")),
    "null content": (
        "empty_content",
        lambda f: f.reply_json(None, tool_calls=[{"function": {"name": "x", "arguments": "{}"}}]),
    ),
    "headings without bullets": ("empty_body", lambda f: f.reply_json("### Goal\n\n### Key facts\n")),
    "twenty times too long": ("off_budget", lambda f: f.reply_json("### Key facts\n" + "- the vault rotates\n" * 6000)),
    "not json": ("bad_json", lambda f: f.reply_raw(200, b"<html>oops</html>", headers={"Content-Type": "text/html"})),
    "cut at max_tokens": (
        "truncated",
        lambda f: f.reply_error(
            200,
            {
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "### Goal\n- keep the"},
                        "finish_reason": "length",
                    }
                ],
            },
        ),
    ),
    "no choices": ("no_choices", lambda f: f.reply_error(200, {"object": "chat.completion", "choices": []})),
    "connection reset": ("transport", lambda f: f.reply_reset()),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_failure_falls_back_to_extractive(
    scenario: str, fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    reason, script = SCENARIOS[scenario]
    script(upstream)
    with capture_logs() as logs:
        result = await make_llm(upstream_http, base_url, counter, timeout=0.3).summarize(TASK)
    assert result.summarizer == "extractive"
    assert result.text and result.text == ExtractiveSummarizer(counter).summarize_text(TASK)
    assert len(upstream.chat_requests()) == 1
    [event] = [e for e in logs if e["event"] == "summary.llm_fallback"]
    assert event["reason"] == reason
    assert event["log_level"] == "warning"
    assert SECRET_TEXT not in repr(event) and "sk-sum" not in repr(event)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_connection_refused_falls_back(upstream_http: UpstreamHttp, counter: TokenCounter) -> None:
    with capture_logs() as logs:
        result = await make_llm(upstream_http, f"http://127.0.0.1:{closed_port()}/v1", counter).summarize(TASK)
    assert result.summarizer == "extractive" and result.text.startswith("### Goal\n- Please remember")
    [event] = [e for e in logs if e["event"] == "summary.llm_fallback"]
    assert event["reason"] == "connection"


async def test_a_failing_later_chunk_falls_back_for_the_whole_task(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_json("### Goal\n- first chunk")
    upstream.reply_error(503, openai_error("overloaded", type="server_error"))
    messages = [user(f"Message {i}: the rollout of service {i} needs a plan and a rollback.") for i in range(40)]
    task = SummaryTask("fresh", messages, max_tokens=100)
    with capture_logs() as logs:
        result = await make_llm(upstream_http, base_url, counter, context_window=900).summarize(task)
    assert result.summarizer == "extractive"
    assert result.text == ExtractiveSummarizer(counter).summarize_text(task)
    [event] = [e for e in logs if e["event"] == "summary.llm_fallback"]
    assert (event["reason"], event["status"], event["chunk"]) == ("status", 503, 2)


async def test_a_failing_fallback_still_does_not_raise(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    class Broken:
        name = "extractive"

        async def summarize(self, task: SummaryTask) -> object:
            raise RuntimeError("bug")

    upstream, base_url = fake
    upstream.reply_error(500, "down")
    summarizer = make_llm(upstream_http, base_url, counter)
    summarizer._fallback = Broken()
    with capture_logs() as logs:
        result = await summarizer.summarize(TASK)
    assert result.summarizer == "extractive" and result.text.startswith("### Background\n- [user] Please remember")
    assert [e["event"] for e in logs] == ["summary.llm_fallback", "summary.fallback_failed"]


async def test_cancellation_is_not_swallowed(
    fake: tuple[FakeUpstream, str], upstream_http: UpstreamHttp, counter: TokenCounter
) -> None:
    upstream, base_url = fake
    upstream.reply_delay(5.0)
    summarizer = make_llm(upstream_http, base_url, counter, timeout=10.0)
    with capture_logs() as logs:
        task = asyncio.ensure_future(summarizer.summarize(TASK))
        while not upstream.chat_requests():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not [e for e in logs if e["event"] == "summary.llm_fallback"]

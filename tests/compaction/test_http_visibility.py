"""What an operator sees of compaction: one ``compaction`` log event per compaction, agreeing with
the response headers and the store, and the per-request log line's ``compacted`` field."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import structlog
from multidict import CIMultiDict

from ctxproxy.compaction.checkpoints import decode_index
from ctxproxy.services import STORE, TASKS
from ctxproxy.session import SessionKey
from ctxproxy.store.keys import checkpoints_key
from tests.conftest import MakeProxy, Upstream

MODEL = "ctx-test-model"
MARKER = "okapi-MARKER-77c1"  # in every user message: message text must never be logged
TENANT = """
default_context_window = 3000
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "cut_point"
summarizer = "extractive"
summary_max_tokens = 300
[compaction.cut_point]
reserve_tokens = 500
keep_recent_tokens = 800
[memory]
enabled = false  # compaction alone (memory is on by default for cut_point)
"""
EVENT_FIELDS = {"session", "strategy", "reason", "range", "tokens_before", "tokens_after", "summarizer", "duration_ms"}


def user(n: int) -> dict[str, Any]:
    return {
        "role": "user",
        "content": f"Step {n} ({MARKER}): the build on runner {n} failed at 0{n % 10}:12 because cache {n} was "
        f"stale. We decided to pin version 1.{n}. The fix must ship before Friday. What next?",
    }


async def test_one_compaction_event_per_compaction_matching_headers_and_store(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": TENANT})
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a build engineer."}]
    responses: list[CIMultiDict[str]] = []
    with structlog.testing.capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        async with aiohttp.ClientSession() as http:
            for n in range(1, 41):
                history.append(user(n))
                async with http.post(
                    proxy.url("/v1/chat/completions"), json={"model": MODEL, "messages": history}
                ) as resp:
                    assert resp.status == 200
                    answer = (await resp.json())["choices"][0]["message"]["content"]
                    responses.append(CIMultiDict(resp.headers))
                history.append({"role": "assistant", "content": answer})
                # The engine's follow-up work ends before the next turn, as for a human-paced client
                # (the race it otherwise causes is tested in test_http_single_flight.py).
                await proxy.server.app[TASKS].drain(5)
        for _ in range(100):  # the request line is written as the response ends
            if sum(e["event"] == "request" for e in logs) >= 40:
                break
            await asyncio.sleep(0.01)

    events = [e for e in logs if e["event"] == "compaction"]
    compacted = [r for r in responses if r.get("X-Ctx-Compacted") == "1"]
    assert len(events) == len(compacted) >= 2
    session = responses[0]["X-Ctx-Session"]
    stored = decode_index(await proxy.server.app[STORE].get(checkpoints_key(SessionKey("default", session, "derived"))))
    assert sorted(c.end for c in stored) == [e["range"][1] for e in events]

    previous_end = 1  # the system message is never summarised
    for event, response in zip(events, compacted, strict=True):
        assert EVENT_FIELDS <= set(event)
        assert event["session"] == session
        assert event["strategy"] == "cut_point" and event["reason"] == "threshold"
        assert event["summarizer"] == "extractive"
        assert isinstance(event["duration_ms"], int | float) and event["duration_ms"] >= 0
        start, end = event["range"]
        assert start == previous_end < end == int(response["X-Ctx-Summarized"])
        previous_end = end
        assert event["tokens_after"] == int(response["X-Ctx-Tokens-After"])
        assert event["tokens_after"] < event["tokens_before"] <= int(response["X-Ctx-Tokens-Before"])
        assert event["request_id"] == response["X-Ctx-Request-Id"]
    assert events[0]["tokens_before"] == int(compacted[0]["X-Ctx-Tokens-Before"])  # nothing summarised before

    lines = [e for e in logs if e["event"] == "request"]
    assert len(lines) == 40
    assert [line["compacted"] for line in lines] == [r.get("X-Ctx-Compacted") == "1" for r in responses]
    assert MARKER not in repr(logs)

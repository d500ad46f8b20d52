"""Chat streams: an overflow error event that comes after events carrying no content (a keep-alive
comment, the role-only first delta) is still met by compacting and retrying — nothing of the
refused stream reaches the client, which reads one clean answer. On the plain relay and on round 1
of the proxy-tool loop's stream alike (``ctxproxy.upstream.opening``).

Both protocols' SDKs reading such a stream: ``tests/protocols/test_stream_opening.py``.
The fake paces its events (``delay``) so the role delta and the error reach the proxy in separate
reads, where a rule that looked only at the first read would relay the role delta and then the
error; the outcome asserted holds however the bytes arrive (``tests/upstream/test_opening.py``
splits them every way without a network). The opposite case, an overflow after content, is
``test_overflow_after_bytes.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conftest import MakeProxy, Upstream
from tests.fakes.upstream import openai_error
from tests.recall.paged import PAGED_TENANT, RECALL, paged_history
from tests.recovery.test_overflow_after_bytes import OPENAI, plain_tenant, stream_gated, text_of
from tests.recovery.test_overflow_retry import history

PACE = 0.05  # seconds between the fake's events
# An overflow that states no numbers: the retry compacts by ctxproxy's own count (a short paged
# conversation cannot be cut to what 8192 of 9120 tokens would ask of it).
PLEASE_REDUCE = openai_error("Please reduce the length of the messages.", code="context_length_exceeded")


def assert_one_clean_answer(events: list[Any], question: str) -> None:
    """One role delta, the echo of ``question``, its finish, ``[DONE]``; no error event."""
    assert not [e for e in events if isinstance(e, dict) and "error" in e], events
    roles = [e for e in events if isinstance(e, dict) and e["choices"] and "role" in e["choices"][0]["delta"]]
    assert len(roles) == 1
    assert text_of(events) == f"echo: {question}"
    assert events[-1] == "[DONE]"


@pytest.mark.parametrize("keepalive", [False, True], ids=["role_delta", "keepalive_then_role_delta"])
async def test_an_overflow_after_a_role_delta_is_compacted_and_retried(
    make_proxy: MakeProxy, upstream: Upstream, keepalive: bool
) -> None:
    proxy = await make_proxy(plain_tenant())
    upstream.fake.reply_sse_error(OPENAI, keepalive=keepalive, delay=PACE)

    headers, events = await stream_gated(proxy, history(30), asyncio.Event())

    assert headers["X-Ctx-Retried"] == "1"
    assert_one_clean_answer(events, "What did we decide?")
    first, retried = upstream.fake.chat_requests()
    assert len(retried.json()["messages"]) < len(first.json()["messages"])  # compacted before the retry


async def test_the_tool_loop_retries_round_one_refused_after_its_role_delta(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    upstream.fake.reply_sse_error(PLEASE_REDUCE, keepalive=True, delay=PACE)

    headers, events = await stream_gated(proxy, paged_history(), asyncio.Event())

    refused, retried = upstream.fake.chat_requests()
    assert RECALL in [t["function"]["name"] for t in refused.json()["tools"]]  # the tool loop's stream
    assert RECALL in [t["function"]["name"] for t in retried.json()["tools"]]
    assert headers["X-Ctx-Retried"] == "1"
    assert_one_clean_answer(events, "What is my locker code?")

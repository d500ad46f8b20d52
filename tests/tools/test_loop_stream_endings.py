"""The tool loop's stream ends like a plain relay's: always with ``[DONE]``, after an error event
when a round's stream failed or ended before its ``[DONE]``; never with a half event."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import openai
import orjson
import pytest

from ctxproxy.upstream.sse import event_payloads
from tests.tools.conftest import LoopProxy, MakeLoopProxy, Upstream
from tests.tools.wire import USER, chat, chunks, recall, sse, streamed_text


async def stream(proxy: LoopProxy) -> tuple[bytes, list[bytes]]:
    async with aiohttp.ClientSession() as http, http.post(proxy.url(), json=chat(stream=True)) as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        raw = await resp.read()
    return raw, event_payloads(raw)


def assert_whole_events(raw: bytes) -> None:
    assert raw.endswith(b"data: [DONE]\n\n")
    for payload in event_payloads(raw)[:-1]:
        assert isinstance(orjson.loads(payload), dict)


def truncated(payload: bytes) -> bool:
    error = orjson.loads(payload).get("error")
    return isinstance(error, dict) and error.get("code") == "upstream_stream_truncated"


async def test_error_event_after_content_is_followed_by_done(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["Checking."], tool_calls=[recall(3)])
    upstream.fake.reply_sse_error({"message": "overloaded", "type": "server_error"}, after_pieces=["It is"])
    raw, payloads = await stream(loop_proxy)
    assert streamed_text(payloads[:-2]) == "Checking.\n\nIt is"
    assert orjson.loads(payloads[-2])["error"]["message"] == "overloaded"
    assert payloads[-1] == b"[DONE]" and not any(truncated(p) for p in payloads[:-1])
    assert_whole_events(raw)


@pytest.mark.parametrize("half_event", [False, True], ids=["at_event_boundary", "mid_event"])
async def test_later_round_ending_without_done_is_reported(
    loop_proxy: LoopProxy, upstream: Upstream, half_event: bool
) -> None:
    upstream.fake.reply_stream(["Checking."], tool_calls=[recall(3)])
    upstream.fake.reply_stream(["It ", "is ", "4711."], end_after=3, half_event=half_event)
    raw, payloads = await stream(loop_proxy)
    assert streamed_text(payloads[:-2]) == "Checking.\n\nIt is "
    assert truncated(payloads[-2]) and payloads[-1] == b"[DONE]"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks(payloads[:-2]))
    assert_whole_events(raw)


@pytest.mark.parametrize("half_event", [False, True], ids=["at_event_boundary", "mid_event"])
async def test_first_round_ending_without_done_is_reported(
    loop_proxy: LoopProxy, upstream: Upstream, half_event: bool
) -> None:
    upstream.fake.reply_stream(["It ", "is ", "4711."], end_after=2, half_event=half_event)
    raw, payloads = await stream(loop_proxy)
    assert streamed_text(payloads[:-2]) == "It "
    assert truncated(payloads[-2]) and payloads[-1] == b"[DONE]"
    assert_whole_events(raw)


async def test_calls_of_a_round_without_done_are_not_answered(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    # role, the call's start, its arguments in four pieces, the finish chunk: everything but [DONE]
    upstream.fake.reply_stream(tool_calls=[recall(3)], end_after=7)
    upstream.fake.reply_stream(["never asked for"])
    raw, payloads = await stream(loop_proxy)
    assert truncated(payloads[-2]) and payloads[-1] == b"[DONE]"
    assert len(upstream.fake.chat_requests()) == 1 and loop_proxy.executed == []
    assert_whole_events(raw)


async def test_later_round_cut_mid_event_relays_no_half_event(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(tool_calls=[recall(3)])
    upstream.fake.reply_stream(["It ", "is ", "4711."], cut_after=3, half_event=True)
    raw, payloads = await stream(loop_proxy)
    assert streamed_text(payloads[:-2]) == "It is "
    assert orjson.loads(payloads[-2])["error"]["code"] == "upstream_connection_error"
    assert_whole_events(raw)


async def test_later_round_cut_after_its_done_is_complete(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(tool_calls=[recall(3)])
    upstream.fake.reply_stream(["It ", "is ", "4711."], cut_after=99)  # [DONE] sent, then the connection cut
    raw, payloads = await stream(loop_proxy)
    assert streamed_text(payloads) == "It is 4711."
    assert b'"error"' not in raw and payloads.count(b"[DONE]") == 1
    assert [c["choices"][0]["finish_reason"] for c in chunks(payloads) if c["choices"][0]["finish_reason"]] == ["stop"]


async def test_sdk_raises_when_a_later_round_ends_without_done(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["Checking."], tool_calls=[recall(3)])
    upstream.fake.reply_stream(["It ", "is ", "4711."], end_after=3)
    client = openai.AsyncOpenAI(base_url=loop_proxy.base_url, api_key="x", max_retries=0)
    received: list[str] = []
    with pytest.raises(openai.APIError) as caught:
        answer = await client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
        async for chunk in answer:
            received += [choice.delta.content or "" for choice in chunk.choices]
    await client.close()
    assert "".join(received) == "Checking.\n\nIt is "
    assert "ended before it was complete" in caught.value.message


async def test_sse_helper_reads_done(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    """A complete two-round stream has no error event: the endings above are not the normal case."""
    upstream.fake.reply_stream(tool_calls=[recall(3)])
    upstream.fake.reply_stream(["It ", "is ", "4711."])
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(stream=True)) as resp:
        payloads = await sse(resp)
    assert payloads[-1] == b"[DONE]" and not any(b'"error"' in p for p in payloads)


@pytest.mark.parametrize("later", [False, True], ids=["first_round", "later_round"])
async def test_a_round_that_stalls_after_content_ends_with_a_timeout_event(
    make_loop_proxy: MakeLoopProxy, upstream: Upstream, later: bool
) -> None:
    # One timer per round's stream keeps read_timeout (ctxproxy.upstream.idle), as aiohttp's did.
    proxy = await make_loop_proxy(read_timeout=0.3)
    never = asyncio.Event()
    if later:
        upstream.fake.reply_stream(["Checking."], tool_calls=[recall(3)])
    upstream.fake.reply_stream(["It ", "is ", "4711."], hold=(2, never))  # the role chunk and "It ", then silence
    started = time.monotonic()
    raw, payloads = await stream(proxy)
    assert time.monotonic() - started >= 0.3
    assert streamed_text(payloads[:-2]) == ("Checking.\n\nIt " if later else "It ")
    assert orjson.loads(payloads[-2])["error"]["code"] == "upstream_timeout" and payloads[-1] == b"[DONE]"
    assert_whole_events(raw)
    never.set()

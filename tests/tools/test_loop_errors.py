"""Failures: a round-1 overflow is handed back, a later one retried once, other errors relayed."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

from ctxproxy.tools.budget import NO_ROOM
from tests.fakes.upstream import openai_error
from tests.tools.conftest import OVERFLOW_MARKER, RECALL_ANSWER, Executed, LoopProxy, MakeLoopProxy, Upstream
from tests.tools.wire import chat, chunks, recall, sse, streamed_text

OVERFLOW = openai_error(
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. "
    "Please reduce the length of the messages.",
    param="messages",
    code="context_length_exceeded",
)


async def test_round_one_overflow_json_is_returned(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_error(400, OVERFLOW)
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat()) as resp:
        assert resp.status == OVERFLOW_MARKER


async def test_round_one_overflow_sse_is_returned(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_sse_error(OVERFLOW)
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(stream=True)) as resp:
        assert resp.status == OVERFLOW_MARKER
        assert resp.content_type == "application/json"  # nothing of the stream reached the client


async def test_round_two_overflow_is_retried_with_the_answers_withdrawn(
    loop_proxy: LoopProxy, upstream: Upstream
) -> None:
    upstream.fake.reply_json("Let me look.", tool_calls=[recall(3), recall(4)])
    upstream.fake.reply_error(400, OVERFLOW)
    upstream.fake.reply_json("I could not read the pages, but the code was 4711.")
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat()) as resp:
        assert resp.status == 200
        answer = await resp.json()
    assert (
        answer["choices"][0]["message"]["content"]
        == "Let me look.\n\nI could not read the pages, but the code was 4711."
    )
    first, overflowed, retried = (r.json() for r in upstream.fake.chat_requests())
    assert [m["content"] for m in overflowed["messages"] if m["role"] == "tool"] == [RECALL_ANSWER] * 2
    # The same conversation (every call still answered), the answers withdrawn, and no more calls.
    assert [m["role"] for m in retried["messages"]] == [m["role"] for m in overflowed["messages"]]
    assert [m["content"] for m in retried["messages"] if m["role"] == "tool"] == [NO_ROOM] * 2
    assert retried["messages"][:-2] == overflowed["messages"][:-2]
    assert retried["tool_choice"] == "none" and "tool_choice" not in overflowed


async def test_round_two_overflow_twice_is_a_context_length_error(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_json(tool_calls=[recall(3)])
    upstream.fake.reply_error(400, OVERFLOW)
    upstream.fake.reply_error(400, OVERFLOW)
    upstream.fake.reply_json("never asked for")
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat()) as resp:
        assert resp.status == 400
        error = (await resp.json())["error"]
    assert error["code"] == "context_length_exceeded" and "withdrew its answers" in error["message"]
    assert len(upstream.fake.chat_requests()) == 3 and upstream.fake.pending == 1  # retried once, not in a loop


async def test_round_two_overflow_stream_is_retried(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["Checking."], tool_calls=[recall(3)])
    upstream.fake.reply_sse_error(OVERFLOW)  # an overflow as the first event of round two
    upstream.fake.reply_stream(["It ", "is ", "4711."])
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(stream=True)) as resp:
        payloads = await sse(resp)
    assert streamed_text(payloads) == "Checking.\n\nIt is 4711."
    assert all(b"error" not in p for p in payloads) and payloads[-1] == b"[DONE]"
    retried = upstream.fake.chat_requests()[2].json()
    assert retried["messages"][-1]["content"] == NO_ROOM and retried["tool_choice"] == "none"


async def test_round_one_overflow_after_its_role_delta_is_returned(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    """The role delta and a keep-alive carry no content: held, and dropped with the refused stream
    (the events come apart, so they reach the loop in separate reads)."""
    upstream.fake.reply_sse_error(OVERFLOW, keepalive=True, delay=0.05)
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(stream=True)) as resp:
        assert resp.status == OVERFLOW_MARKER
        assert resp.content_type == "application/json"


async def test_round_two_overflow_after_its_role_delta_is_retried(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["Checking."], tool_calls=[recall(3)])
    upstream.fake.reply_sse_error(OVERFLOW, keepalive=True, delay=0.05)
    upstream.fake.reply_stream(["It ", "is ", "4711."])
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(stream=True)) as resp:
        payloads = await sse(resp)
    assert streamed_text(payloads) == "Checking.\n\nIt is 4711."
    assert all(b"error" not in p for p in payloads) and payloads[-1] == b"[DONE]"
    assert upstream.fake.chat_requests()[2].json()["messages"][-1]["content"] == NO_ROOM


async def test_round_two_overflow_twice_stream_ends_with_an_error_event(
    loop_proxy: LoopProxy, upstream: Upstream
) -> None:
    upstream.fake.reply_stream(["Checking. "], tool_calls=[recall(3)])
    upstream.fake.reply_error(400, OVERFLOW)
    upstream.fake.reply_sse_error(OVERFLOW)
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(stream=True)) as resp:
        assert resp.status == 200
        payloads = await sse(resp)
    assert streamed_text(payloads[:-2]) == "Checking. "
    error = orjson.loads(payloads[-2])["error"]
    assert error["code"] == "context_length_exceeded" and error["type"] == "invalid_request_error"
    assert payloads[-1] == b"[DONE]" and len(upstream.fake.chat_requests()) == 3


async def test_round_two_error_json(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_json(tool_calls=[recall(3)])
    limited = openai_error("Rate limit reached", type="requests", code="rate_limit_exceeded")
    upstream.fake.reply_error(429, limited, headers={"Retry-After": "7"})
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat()) as resp:
        assert resp.status == 429
        assert resp.headers["Retry-After"] == "7"
        assert resp.headers["X-Ctx-Test"] == "loop"
        assert await resp.json() == limited


async def test_round_two_error_stream(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["Checking. "], tool_calls=[recall(3)])
    upstream.fake.reply_error(500, openai_error("The server had an error", type="server_error"))
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(stream=True)) as resp:
        assert resp.status == 200
        payloads = await sse(resp)
    assert streamed_text(payloads[:-2]) == "Checking. "
    assert orjson.loads(payloads[-2]) == openai_error("The server had an error", type="server_error")
    assert payloads[-1] == b"[DONE]"


async def test_round_two_error_page_stream(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    """A later round's error answer without an error object (a proxy's HTML page) ends the stream
    with one of ctxproxy's own, naming the status."""
    upstream.fake.reply_stream(["Checking. "], tool_calls=[recall(3)])
    upstream.fake.reply_error(502, "<html>Bad Gateway</html>")
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(stream=True)) as resp:
        assert resp.status == 200
        payloads = await sse(resp)
    assert streamed_text(payloads[:-2]) == "Checking. "
    error = orjson.loads(payloads[-2])["error"]
    assert error["type"] == "upstream_error"
    assert error["message"] == "The upstream answered HTTP 502 to a proxy tool round."
    assert "Bad Gateway" not in payloads[-2].decode()
    assert payloads[-1] == b"[DONE]"


async def test_round_two_cut_mid_stream(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(tool_calls=[recall(3)])
    upstream.fake.reply_stream(["partial ", "answer ", "never ", "finished"], cut_after=3)
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(stream=True)) as resp:
        payloads = await sse(resp)
    assert streamed_text(payloads[:-2]) == "partial answer "
    error = orjson.loads(payloads[-2])["error"]
    assert (error["type"], error["code"]) == ("upstream_error", "upstream_connection_error")
    assert payloads[-1] == b"[DONE]"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks(payloads[:-2]))


async def test_round_two_connection_reset(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(tool_calls=[recall(3)])
    upstream.fake.reply_reset()
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(stream=True)) as resp:
        payloads = await sse(resp)
    assert orjson.loads(payloads[-2])["error"]["code"] == "upstream_connection_error"
    assert payloads[-1] == b"[DONE]"


async def test_failing_executor_is_explained_to_the_model(make_loop_proxy: MakeLoopProxy, upstream: Upstream) -> None:
    async def broken(call: Executed) -> str:
        raise RuntimeError("store is down")

    proxy = await make_loop_proxy(answer=broken)
    upstream.fake.reply_json(tool_calls=[recall(3)])
    upstream.fake.reply_json("I could not look it up.")
    async with aiohttp.ClientSession() as http, http.post(proxy.url(), json=chat()) as resp:
        assert resp.status == 200
        assert (await resp.json())["choices"][0]["message"]["content"] == "I could not look it up."
    tool_message = upstream.fake.chat_requests()[1].json()["messages"][-1]
    assert tool_message["role"] == "tool" and "internal error" in tool_message["content"]
    assert "store is down" not in tool_message["content"]


async def test_client_leaving_cancels_the_upstream_round(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(tool_calls=[recall(3)])
    upstream.fake.reply_stream(["a ", "b ", "c ", "d ", "e"], delay=0.5)
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(stream=True)) as resp:
        async for line in resp.content:
            if b'"content":"a "' in line:
                break
    await asyncio.wait_for(upstream.fake.cancelled.wait(), timeout=3)
    assert len(upstream.fake.chat_requests()) == 2

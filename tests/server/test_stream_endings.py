"""However the upstream's stream ends, the client's ends with ``data: [DONE]``, and one that was
not complete says so with an OpenAI-shaped error event first — never a silently short answer,
never a half event."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import orjson
import pytest

from ctxproxy.upstream.sse import event_payloads
from tests.conftest import Proxy, Upstream

MESSAGES: list[Any] = [{"role": "user", "content": "stream please"}]
BODY = {"model": "gpt-4o-mini", "messages": MESSAGES, "stream": True}
SSE_HEADERS = {"Content-Type": "text/event-stream"}


async def stream(proxy: Proxy) -> tuple[bytes, list[bytes]]:
    """The client's whole body, and its data payloads."""
    async with aiohttp.ClientSession() as http, http.post(proxy.url("/v1/chat/completions"), json=BODY) as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        raw = await resp.read()
    return raw, event_payloads(raw)


def text_of(payloads: list[bytes]) -> str:
    chunks = [orjson.loads(p) for p in payloads if p != b"[DONE]"]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))


def assert_whole_events(raw: bytes) -> None:
    """Every event the client got is complete: terminated, its data a JSON object or ``[DONE]``."""
    assert raw.endswith(b"data: [DONE]\n\n")
    for payload in event_payloads(raw):
        assert payload == b"[DONE]" or isinstance(orjson.loads(payload), dict)


async def sdk_text(proxy: Proxy) -> tuple[list[str], openai.APIError]:
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    received: list[str] = []
    with pytest.raises(openai.APIError) as caught:
        chunks = await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
        async for chunk in chunks:
            received += [choice.delta.content or "" for choice in chunk.choices]
    await client.close()
    return received, caught.value


async def test_error_event_after_content_is_followed_by_done(proxy: Proxy, upstream: Upstream) -> None:
    overloaded = {"message": "overloaded", "type": "server_error", "param": None, "code": "overloaded"}
    upstream.fake.reply_sse_error(overloaded, after_pieces=["partial ", "answer"])
    raw, payloads = await stream(proxy)
    assert text_of(payloads[:-2]) == "partial answer"
    assert orjson.loads(payloads[-2]) == {"error": overloaded}  # the upstream's own error, once
    assert payloads[-1] == b"[DONE]" and b"upstream_stream_truncated" not in raw
    assert_whole_events(raw)


@pytest.mark.parametrize("half_event", [False, True], ids=["at_event_boundary", "mid_event"])
async def test_stream_ending_without_done_is_reported(proxy: Proxy, upstream: Upstream, half_event: bool) -> None:
    upstream.fake.reply_stream(["partial ", "answer ", "never ", "finished"], end_after=3, half_event=half_event)
    raw, payloads = await stream(proxy)
    assert text_of(payloads[:-2]) == "partial answer "
    error = orjson.loads(payloads[-2])["error"]
    assert (error["type"], error["code"], error["param"]) == ("upstream_error", "upstream_stream_truncated", None)
    assert "ended before it was complete" in error["message"]
    assert payloads[-1] == b"[DONE]"
    assert_whole_events(raw)  # the half event was not relayed


async def test_stream_cut_mid_event_relays_no_half_event(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["partial ", "answer ", "never ", "finished"], cut_after=3, half_event=True)
    raw, payloads = await stream(proxy)
    assert text_of(payloads[:-2]) == "partial answer "
    assert orjson.loads(payloads[-2])["error"]["code"] == "upstream_connection_error"
    assert_whole_events(raw)


async def test_empty_stream_is_reported(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_raw(200, b"", headers=SSE_HEADERS)
    raw, payloads = await stream(proxy)
    assert [orjson.loads(p)["error"]["code"] for p in payloads[:-1]] == ["upstream_stream_truncated"]
    assert_whole_events(raw)


async def test_done_without_its_blank_line_is_complete(proxy: Proxy, upstream: Upstream) -> None:
    """Some servers end with ``data: [DONE]`` and no blank line: the stream is complete all the same."""
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
    body = b"data: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]"
    upstream.fake.reply_raw(200, body, headers=SSE_HEADERS)
    raw, payloads = await stream(proxy)
    assert payloads == [orjson.dumps(chunk), b"[DONE]"]
    assert_whole_events(raw)


async def test_cut_after_done_adds_nothing(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["all ", "there"], cut_after=99)  # [DONE] sent, then the connection cut
    raw, payloads = await stream(proxy)
    assert text_of(payloads) == "all there"
    assert b'"error"' not in raw and payloads.count(b"[DONE]") == 1
    assert_whole_events(raw)


async def test_sdk_raises_on_a_stream_ending_without_done(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["partial ", "answer ", "never ", "finished"], end_after=3)
    received, error = await sdk_text(proxy)
    assert "".join(received) == "partial answer "
    assert "ended before it was complete" in error.message


async def test_sdk_raises_on_an_error_event_after_content(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_sse_error({"message": "overloaded", "type": "server_error"}, after_pieces=["x"])
    received, error = await sdk_text(proxy)
    assert "".join(received) == "x" and error.message == "overloaded"


@pytest.mark.parametrize(
    "odd", [{"type": [], "note": "error"}, {"type": {"k": 1}, "object": ["error"]}, {"type": None, "error": 0}]
)
async def test_an_odd_event_in_the_opening_is_relayed_not_a_crash(proxy: Proxy, upstream: Upstream, odd: Any) -> None:
    """An event whose ``type`` is not a string, among the events ctxproxy reads for an overflow
    before the client's headers, is passed on like any other."""
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
    body = b"data: " + orjson.dumps(odd) + b"\n\ndata: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]\n\n"
    upstream.fake.reply_raw(200, body, headers=SSE_HEADERS)
    raw, payloads = await stream(proxy)
    assert payloads == [orjson.dumps(odd), orjson.dumps(chunk), b"[DONE]"]
    upstream.fake.reply_json("still serving")
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json={**BODY, "stream": False}) as resp:
            assert resp.status == 200

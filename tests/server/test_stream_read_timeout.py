"""``read_timeout`` on a relayed chat stream, kept by one timer per stream (``upstream.idle``):
a stall before content is the 504 it was, a stall after it an error event and ``[DONE]``, and a
stream whose events keep coming is never cut, however long it lasts."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson

from tests.conftest import MakeProxy, Upstream
from tests.server.test_streaming import BODY, read_events
from tests.server.test_upstream_faults import assert_proxy_error, tenant


async def test_a_stall_after_content_is_an_error_event_then_done(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant(read_timeout=0.3)})
    never = asyncio.Event()
    upstream.fake.reply_stream(["one ", "two ", "three"], hold=(2, never))  # the role chunk and "one ", then silence
    started = time.monotonic()
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json=BODY) as resp:
            assert resp.status == 200
            events = [p for _, p in await read_events(resp)]
    assert time.monotonic() - started >= 0.3
    assert events[-1] == b"[DONE]"
    error = orjson.loads(events[-2])["error"]
    assert (error["type"], error["code"]) == ("upstream_error", "upstream_timeout")
    contents = [orjson.loads(p)["choices"][0]["delta"].get("content") for p in events[:-2]]
    assert contents == ["", "one "]
    never.set()


async def test_a_stall_before_content_is_a_504(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant(read_timeout=0.3)})
    never = asyncio.Event()
    upstream.fake.reply_stream(["one"], hold=(1, never))  # the role chunk (held by the proxy), then silence
    started = time.monotonic()
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json=BODY) as resp:
            status, answer = resp.status, orjson.loads(await resp.read())
    assert time.monotonic() - started >= 0.3
    assert_proxy_error(status, answer, 504, "upstream_timeout", port=upstream.server.port)
    never.set()


async def test_a_stream_that_keeps_coming_outlasts_the_read_timeout(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant(read_timeout=0.3)})
    pieces = [f"w{i} " for i in range(8)]
    upstream.fake.reply_stream(pieces, delay=0.12)  # ~1.1 s in all, no gap as long as 0.3 s
    started = time.monotonic()
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json=BODY) as resp:
            events = [p for _, p in await read_events(resp)]
    assert time.monotonic() - started > 3 * 0.3
    assert events[-1] == b"[DONE]"
    chunks = [orjson.loads(p) for p in events[:-1]]
    assert all("error" not in c for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "".join(pieces)
    # The connection's own timer is aiohttp's again for the next request on it.
    upstream.fake.reply_delay(2)
    status, answer = await _post_json(proxy.url("/v1/chat/completions"))
    assert_proxy_error(status, answer, 504, "upstream_timeout", port=upstream.server.port)


async def _post_json(url: str) -> tuple[int, dict[str, object]]:
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json={**BODY, "stream": False}) as resp:
            return resp.status, orjson.loads(await resp.read())

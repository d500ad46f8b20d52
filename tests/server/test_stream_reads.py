"""A stream relayed whatever reads its bytes arrive in: the client gets the same bytes and the
request's log line the same usage when the upstream's events come whole, in one write, or cut at
random points with pauses between the pieces (so that each piece is a read of its own); and every
event reaches the client while the upstream still holds the rest of its stream."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.conftest import MakeProxy, Proxy

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "stream please"}], "stream": True}
USAGE = {
    "prompt_tokens": 1234,
    "completion_tokens": 5,
    "total_tokens": 1239,
    "prompt_tokens_details": {"cached_tokens": 1024},
}


def _event(payload: dict[str, Any], ending: bytes = b"\n\n") -> bytes:
    return b"data: " + orjson.dumps(payload) + ending


def _chunk(delta: dict[str, Any], ending: bytes = b"\n\n") -> bytes:
    return _event({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}, ending)


SHOWN = [  # what the client gets: the usage chunk ctxproxy asked for is taken out
    b": keep-alive\n\n",
    _chunk({"role": "assistant", "content": ""}),
    *(_chunk({"content": f"word{i} "}, b"\r\n\r\n" if i % 5 == 4 else b"\n\n") for i in range(12)),
]
STREAM = SHOWN + [_event({"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": USAGE})]
DONE = b"data: [DONE]\n\n"


class CutUpstream:
    """An upstream that sends ``STREAM`` and ``[DONE]`` cut into the pieces it is given, with a
    pause after each; ``gate``: it waits for this after ``[DONE]``, before ending its response."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.pause = 0.0
        self.gate: asyncio.Event | None = None

    async def chat(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for piece in self.pieces:
            await response.write(piece)
            await asyncio.sleep(self.pause)
        if self.gate is not None:
            await asyncio.wait_for(self.gate.wait(), 10)
        await response.write_eof()
        return response


@pytest.fixture
async def cut(aiohttp_server: Callable[..., Awaitable[TestServer]], make_proxy: MakeProxy) -> tuple[CutUpstream, Proxy]:
    upstream = CutUpstream()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", upstream.chat)
    server = await aiohttp_server(app)
    proxy = await make_proxy({"default": f'[upstream]\nbase_url = "{server.make_url("/v1")}"\n'})
    return upstream, proxy


def _cuts(stream: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    ends = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 30))) + [len(stream)]
    return [stream[start:end] for start, end in zip([0, *ends], ends, strict=False)]


async def _relayed(proxy: Proxy) -> tuple[bytes, dict[str, Any]]:
    with structlog.testing.capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        async with aiohttp.ClientSession() as http:
            async with http.post(proxy.url("/v1/chat/completions"), json=BODY) as resp:
                assert resp.status == 200
                received = await resp.read()
        for _ in range(200):
            if lines := [e for e in logs if e["event"] == "request"]:
                return received, lines[0]
            await asyncio.sleep(0.01)
    raise AssertionError("no request line")


@pytest.mark.parametrize("seed", range(8))
async def test_the_same_bytes_and_usage_however_the_stream_is_cut(cut: tuple[CutUpstream, Proxy], seed: int) -> None:
    upstream, proxy = cut
    stream = b"".join(STREAM) + DONE
    upstream.pieces = [stream]
    whole, whole_line = await _relayed(proxy)
    upstream.pieces, upstream.pause = _cuts(stream, seed), (0.002 if seed % 2 else 0.0)
    pieces, pieces_line = await _relayed(proxy)
    assert whole == pieces == b"".join(SHOWN) + DONE
    learned = {k: whole_line[k] for k in ("cached_tokens", "cached_from")}  # priced from the usage chunk
    assert learned == {k: pieces_line[k] for k in learned} and learned["cached_from"] == "upstream"


async def test_each_event_reaches_the_client_while_the_upstream_holds_the_rest(cut: tuple[CutUpstream, Proxy]) -> None:
    upstream, proxy = cut
    upstream.pieces, upstream.gate = [*STREAM, DONE], asyncio.Event()
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json=BODY) as resp:
            received = b""
            async with asyncio.timeout(5):  # the whole stream, [DONE] included, while the upstream waits
                while not received.endswith(DONE):
                    received += await resp.content.readany()
            upstream.gate.set()
            received += await resp.read()
    assert received == b"".join(SHOWN) + DONE

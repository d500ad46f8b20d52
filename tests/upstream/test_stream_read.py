"""``idle.StreamRead`` on a real streamed answer, from ctxproxy's own client and from aiohttp's (the
passthrough routes'): a wait for bytes that lasts ``read_timeout`` fails as aiohttp's timer failed
it, however long the stream; time the reader spends not reading is not the upstream's silence."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.http1 import AnyResponse
from ctxproxy.upstream.idle import StreamRead
from ctxproxy.upstream.port import UpstreamPort

SECONDS = 0.1
MakeServer = Callable[..., Awaitable[TestServer]]


class Pieces:
    """An upstream that sends a piece each time the test releases one, then nothing."""

    def __init__(self) -> None:
        self.release: asyncio.Queue[bytes] = asyncio.Queue()

    async def handler(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        while piece := await self.release.get():
            await response.write(piece)
        await asyncio.sleep(10)  # silent, the stream never ends
        return response


@asynccontextmanager
async def answer(client: str, url: str, upstream_http: UpstreamHttp) -> AsyncIterator[AnyResponse]:
    if client == "own":
        port = UpstreamPort(upstream_http, UpstreamConfig.model_validate({"base_url": url, "read_timeout": 600}))
        async with port.post("/stream", b"{}", CIMultiDict()) as up:
            yield up
    else:
        async with aiohttp.ClientSession() as session, session.post(f"{url}/stream", data=b"{}") as relayed:
            yield relayed


@pytest.mark.parametrize("client", ["own", "aiohttp"])
async def test_only_time_spent_waiting_counts(
    client: str, aiohttp_server: MakeServer, upstream_http: UpstreamHttp
) -> None:
    pieces = Pieces()
    app = web.Application()
    app.router.add_post("/v1/stream", pieces.handler)
    server = await aiohttp_server(app)
    loop = asyncio.get_running_loop()
    async with answer(client, str(server.make_url("/v1")), upstream_http) as up:
        read = StreamRead(up, SECONDS)
        try:
            for piece in (b"data: 1\n\n", b"data: 2\n\n"):
                pieces.release.put_nowait(piece)
                assert await read.readany() == piece
                await asyncio.sleep(SECONDS * 3)  # not reading: the upstream's silence is not counted
            for _ in range(3):  # pieces within the timeout keep the stream going past it
                pieces.release.put_nowait(b"data: more\n\n")
                assert await read.readany() == b"data: more\n\n"
            pieces.release.put_nowait(b"")
            began = loop.time()
            with pytest.raises(aiohttp.SocketTimeoutError):
                await read.readany()
            assert SECONDS - 0.01 <= loop.time() - began < SECONDS + 1
            assert isinstance(read.exception(), aiohttp.SocketTimeoutError)
        finally:
            read.close()


async def test_closed_it_fails_nothing(aiohttp_server: MakeServer, upstream_http: UpstreamHttp) -> None:
    pieces = Pieces()
    app = web.Application()
    app.router.add_post("/v1/stream", pieces.handler)
    server = await aiohttp_server(app)
    async with answer("own", str(server.make_url("/v1")), upstream_http) as up:
        read = StreamRead(up, SECONDS)
        pieces.release.put_nowait(b"data: 1\n\n")
        assert await read.readany() == b"data: 1\n\n"
        read.close()
        await asyncio.sleep(SECONDS * 3)
        assert read.exception() is None

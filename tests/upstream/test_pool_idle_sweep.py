"""Idle keep-alive connections are closed by the pool's timer once idle ``keepalive`` (here a short
one), not left open until the upstream closes them, and at the pool's close: what a real server
on loopback sees of its connections."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp import web

from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.pool import Pool
from tests.upstream.test_http1_pool import MakeServer, call, port_for, start


class Connections:
    """The upstream's side of each connection a request came on (its transport, by client port)."""

    def __init__(self) -> None:
        self.transports: dict[int, asyncio.BaseTransport] = {}

    async def handler(self, request: web.Request) -> web.Response:
        transport = request.transport
        assert transport is not None
        self.transports[transport.get_extra_info("peername")[1]] = transport
        await asyncio.sleep(0.05)  # calls made at once overlap: one connection each
        return web.json_response({"ok": True})

    def open(self) -> int:
        return sum(not transport.is_closing() for transport in self.transports.values())


async def until(condition: Any, seconds: float = 2.0) -> None:
    """Wait for the upstream to see what the client did (its side closes as its loop reads the FIN)."""
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)


async def test_connections_idle_past_keepalive_are_closed(aiohttp_server: MakeServer) -> None:
    seen = Connections()
    server, _ = await start(aiohttp_server, seen.handler)  # aiohttp's server keeps them 75 s
    http = UpstreamHttp(Pool(keepalive=0.4), aiohttp.ClientSession())
    try:
        port = port_for(http, server)
        await asyncio.gather(*(call(port) for _ in range(3)))
        assert len(seen.transports) == 3 and http.pool.open == 3
        await asyncio.sleep(0.2)
        assert seen.open() == 3  # not yet
        await until(lambda: seen.open() == 0)
        assert seen.open() == 0 and http.pool.open == 0
        assert await call(port) == b'{"ok": true}'  # a new one
        assert len(seen.transports) == 4 and http.pool.open == 1
    finally:
        await http.close()


async def test_a_connection_in_use_is_kept_and_only_the_idle_ones_go(aiohttp_server: MakeServer) -> None:
    """One connection used every 0.1 s stays open across the sweeps; the two others opened beside
    it once, idle since, are closed."""
    seen = Connections()
    server, _ = await start(aiohttp_server, seen.handler)
    http = UpstreamHttp(Pool(keepalive=0.3), aiohttp.ClientSession())
    try:
        port = port_for(http, server)
        await asyncio.gather(*(call(port) for _ in range(3)))
        for _ in range(12):
            await asyncio.sleep(0.1)
            await call(port)
        assert len(seen.transports) == 3  # no new connection was needed
        assert seen.open() == 1 and http.pool.open == 1
    finally:
        await http.close()


async def test_a_connection_the_upstream_closed_is_let_go_of_without_a_call(aiohttp_server: MakeServer) -> None:
    seen = Connections()
    server, _ = await start(aiohttp_server, seen.handler, keepalive_timeout=0.1)
    http = UpstreamHttp(Pool(keepalive=0.5), aiohttp.ClientSession())
    try:
        await call(port_for(http, server))
        await asyncio.sleep(0.3)
        assert seen.open() == 0 and http.pool.open == 1  # closed, not yet noticed
        await until(lambda: http.pool.open == 0)
        assert http.pool.open == 0
    finally:
        await http.close()


async def test_closing_the_pool_closes_its_idle_connections(aiohttp_server: MakeServer) -> None:
    seen = Connections()
    server, _ = await start(aiohttp_server, seen.handler)
    http = UpstreamHttp(Pool(), aiohttp.ClientSession())
    port = port_for(http, server)
    await asyncio.gather(*(call(port) for _ in range(2)))
    assert seen.open() == 2
    await http.close()
    await until(lambda: seen.open() == 0)
    assert seen.open() == 0 and http.pool.open == 0

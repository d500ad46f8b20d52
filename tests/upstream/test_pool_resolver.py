"""A new connection's addresses (``ctxproxy.upstream.resolver``, ``dial``): the system's resolver
asked once per host for ``ttl`` (counted: the real lookup, wrapped), lookups at once shared,
failures not kept, IP addresses never looked up, and the next address tried when one refuses or
does not answer. Against a real server on loopback, reached as ``localhost``."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from collections.abc import Sequence

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from pydantic import ValidationError

from ctxproxy.config.models import ServerSettings
from ctxproxy.errors import UpstreamUnavailable
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.pool import Pool
from ctxproxy.upstream.port import transport_failure
from ctxproxy.upstream.resolver import MAX_HOSTS, AddrInfo, Resolver, system_lookup
from tests.upstream.test_http1_pool import MakeServer, Seen, call, ok, port_for, start


class Counted:
    """The system's lookup, counted per (host, port); ``delay`` before it, ``failures`` first calls
    that fail as a name that does not resolve, ``before``: addresses put ahead of its answer."""

    def __init__(self, delay: float = 0.0, failures: int = 0, before: Sequence[AddrInfo] = ()) -> None:
        self.calls: Counter[tuple[str, int]] = Counter()
        self.delay, self.failures, self.before = delay, failures, list(before)

    async def __call__(self, host: str, port: int) -> Sequence[AddrInfo]:
        self.calls[host, port] += 1
        await asyncio.sleep(self.delay)
        if self.failures:
            self.failures -= 1
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.before + list(await system_lookup(host, port))


async def served(aiohttp_server: MakeServer) -> tuple[TestServer, Seen, str]:
    server, seen = await start(aiohttp_server, ok)
    return server, seen, f"http://localhost:{server.port}/v1"


def http_with(lookup: Counted, ttl: float = 300.0) -> UpstreamHttp:
    """keepalive 0: every call makes a new connection, so every call needs addresses."""
    return UpstreamHttp(Pool(keepalive=0, resolver=Resolver(ttl, lookup)), aiohttp.ClientSession())


async def test_new_connections_look_up_once_within_the_ttl(aiohttp_server: MakeServer) -> None:
    server, seen, base = await served(aiohttp_server)
    lookup = Counted()
    http = http_with(lookup)
    try:
        port = port_for(http, base)
        for _ in range(4):
            assert await call(port) == b'{"ok": true}'
        assert len(set(seen.peers)) == 4  # four new connections
        assert lookup.calls == {("localhost", server.port): 1}
    finally:
        await http.close()


async def test_a_lookup_is_made_again_after_the_ttl(aiohttp_server: MakeServer) -> None:
    server, seen, base = await served(aiohttp_server)
    for ttl, expected in [(0.2, 2), (0, 3)]:  # 0: each new connection looks up
        lookup = Counted()
        http = http_with(lookup, ttl)
        try:
            port = port_for(http, base)
            await call(port)
            await call(port)
            await asyncio.sleep(0.3)
            await call(port)
            assert lookup.calls[("localhost", server.port)] == expected
        finally:
            await http.close()


async def test_connections_opened_at_once_share_one_lookup(aiohttp_server: MakeServer) -> None:
    server, seen, base = await served(aiohttp_server)
    lookup = Counted(delay=0.1)
    http = http_with(lookup)
    try:
        port = port_for(http, base)
        answers = await asyncio.gather(*(call(port) for _ in range(8)))
        assert answers == [b'{"ok": true}'] * 8
        assert len(set(seen.peers)) == 8
        assert lookup.calls == {("localhost", server.port): 1}
    finally:
        await http.close()


async def test_a_lookup_outlives_the_call_that_started_it() -> None:
    """Its first caller cancelled (a connect timeout): the lookup goes on for the others, once."""
    lookup = Counted(delay=0.2)
    resolver = Resolver(300, lookup)
    first = asyncio.ensure_future(resolver.addresses("localhost", 80))
    await asyncio.sleep(0.05)
    second = asyncio.ensure_future(resolver.addresses("localhost", 80))
    first.cancel()
    addresses = await second
    assert list(addresses) == list(
        await system_lookup("localhost", 80)
    )  # the one lookup's answer, whatever the hosts file says
    assert first.cancelled() and lookup.calls == {("localhost", 80): 1}
    await resolver.addresses("localhost", 80)
    assert lookup.calls == {("localhost", 80): 1}


async def test_a_failed_lookup_is_not_kept(aiohttp_server: MakeServer) -> None:
    server, seen, base = await served(aiohttp_server)
    lookup = Counted(failures=1)
    http = http_with(lookup)
    try:
        port = port_for(http, base)
        with pytest.raises(UpstreamUnavailable) as caught:
            await call(port)
        assert transport_failure(caught.value) == ("connection", "ClientConnectorDNSError")
        assert caught.value.cause == "could not connect to the upstream (ClientConnectorDNSError)"
        assert http.pool.open == 0
        assert await call(port) == b'{"ok": true}'  # looked up again, and kept
        await call(port)
        assert lookup.calls == {("localhost", server.port): 2}
    finally:
        await http.close()


async def test_an_ip_address_is_not_looked_up(aiohttp_server: MakeServer) -> None:
    server, seen = await start(aiohttp_server, ok)
    lookup = Counted()
    http = http_with(lookup)
    try:
        port = port_for(http, f"http://127.0.0.1:{server.port}/v1")
        await call(port)
        await call(port)
        assert len(set(seen.peers)) == 2 and not lookup.calls
    finally:
        await http.close()
    assert [a[4] for a in await Resolver(300, lookup).addresses("::1", 443)] == [("::1", 443, 0, 0)]
    assert not lookup.calls


async def test_the_cache_holds_at_most_max_hosts() -> None:
    lookup = Counted()
    resolver = Resolver(300, lookup)
    for port in range(1, MAX_HOSTS + 2):  # one more than it holds: the oldest, port 1, is dropped
        await resolver.addresses("localhost", port)
    await resolver.addresses("localhost", MAX_HOSTS + 1)
    assert lookup.calls[("localhost", MAX_HOSTS + 1)] == 1
    await resolver.addresses("localhost", 1)
    assert lookup.calls[("localhost", 1)] == 2


def address(host: str, port: int) -> AddrInfo:
    return (socket.AF_INET, socket.SOCK_STREAM, 6, "", (host, port))


async def test_an_address_that_refuses_is_passed_over(aiohttp_server: MakeServer) -> None:
    """127.0.0.2 is loopback too, but nothing listens there: refused, the next address is tried."""
    server, seen, base = await served(aiohttp_server)
    lookup = Counted(before=[address("127.0.0.2", server.port)])
    http = http_with(lookup)
    try:
        port = port_for(http, base)
        for _ in range(3):  # whichever address the rotation puts first
            assert await call(port) == b'{"ok": true}'
        assert len(set(seen.peers)) == 3
    finally:
        await http.close()


async def test_an_address_that_does_not_answer_costs_a_quarter_second(aiohttp_server: MakeServer) -> None:
    """A listener that never accepts, its queue full: a connection to it hangs (the SYN is
    dropped); the next address is started beside it after 0.25 s, well within connect_timeout."""
    server, seen, base = await served(aiohttp_server)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        fillers = [socket.socket() for _ in range(3)]
        for filler in fillers:
            filler.setblocking(False)
            filler.connect_ex(listener.getsockname())
        try:
            hanging = address("127.0.0.1", listener.getsockname()[1])
            lookup = Counted(before=[hanging])
            http = UpstreamHttp(Pool(resolver=Resolver(300, lookup)), aiohttp.ClientSession())
            try:
                loop = asyncio.get_running_loop()
                started = loop.time()
                await call(port_for(http, base, connect_timeout=5))
                assert loop.time() - started < 2
            finally:
                await http.close()
        finally:
            for filler in fillers:
                filler.close()


def test_the_ttl_is_a_server_setting_of_whole_seconds() -> None:
    assert ServerSettings().upstream_dns_ttl == 300
    assert ServerSettings.model_validate({"upstream_dns_ttl": 0}).upstream_dns_ttl == 0
    for wrong in (-1, 0.5, "300s"):
        with pytest.raises(ValidationError):
            ServerSettings.model_validate({"upstream_dns_ttl": wrong})

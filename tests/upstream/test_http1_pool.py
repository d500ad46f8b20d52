"""ctxproxy's own upstream client (``ctxproxy.upstream.pool`` / ``http1``), through the port,
against real servers on loopback: connections kept alive and reused, never one the upstream
closed or whose answer was left unread; every way a body can end; timeouts; the pool's cap;
TLS; and the request's head refused when a header would split it."""

from __future__ import annotations

import asyncio
import gzip
import socket
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.errors import BadRequest, UpstreamTimeout, UpstreamUnavailable
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.headers import upstream_request_headers, upstream_target, upstream_url
from ctxproxy.upstream.pool import Pool
from ctxproxy.upstream.port import UpstreamPort, transport_failure
from ctxproxy.upstream.request_head import request_head
from tests.upstream.raw_upstream import raw_upstream

CHAT = "/chat/completions"
BODY = b'{"model": "m", "messages": []}'
MakeServer = Callable[..., Awaitable[TestServer]]


class Seen:
    """What the test upstream saw: the client port of each request's connection."""

    def __init__(self) -> None:
        self.peers: list[int] = []
        self.active = 0
        self.most_active = 0


async def start(aiohttp_server: MakeServer, handler: Any, **kwargs: Any) -> tuple[TestServer, Seen]:
    seen = Seen()

    async def recorded(request: web.Request) -> web.StreamResponse:
        await request.read()
        seen.peers.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        seen.active += 1
        seen.most_active = max(seen.most_active, seen.active)
        try:
            return await handler(request)  # type: ignore[no-any-return]
        finally:
            seen.active -= 1

    app = web.Application()
    app.router.add_post("/v1/chat/completions", recorded)
    return await aiohttp_server(app, **kwargs), seen


def port_for(http: UpstreamHttp, server: TestServer | str, **fields: Any) -> UpstreamPort:
    base = server if isinstance(server, str) else str(server.make_url("/v1"))
    return UpstreamPort(http, UpstreamConfig.model_validate({"base_url": base, **fields}))


async def ok(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def call(port: UpstreamPort) -> bytes:
    async with port.post(CHAT, BODY, CIMultiDict()) as response:
        assert response.status == 200
        return await port.read(response)


async def test_sequential_calls_share_one_connection(upstream_http: UpstreamHttp, aiohttp_server: MakeServer) -> None:
    server, seen = await start(aiohttp_server, ok)
    port = port_for(upstream_http, server)
    for _ in range(5):
        assert await call(port) == b'{"ok": true}'
    assert len(seen.peers) == 5 and len(set(seen.peers)) == 1
    assert upstream_http.pool.open == 1


async def test_a_connection_the_upstream_closed_while_idle_is_not_used(
    upstream_http: UpstreamHttp, aiohttp_server: MakeServer
) -> None:
    server, seen = await start(aiohttp_server, ok, keepalive_timeout=0.1)
    port = port_for(upstream_http, server)
    await call(port)
    await asyncio.sleep(0.4)  # the upstream's keep-alive timeout closes the idle connection
    await call(port)
    assert len(set(seen.peers)) == 2
    assert upstream_http.pool.open == 1  # the closed one was dropped, not counted


async def test_an_answer_left_unread_closes_its_connection(
    upstream_http: UpstreamHttp, aiohttp_server: MakeServer
) -> None:
    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(20):
            await response.write(b"data: x\n\n")
            await asyncio.sleep(0.02)
        return response

    server, seen = await start(aiohttp_server, stream)
    port = port_for(upstream_http, server)
    async with port.post(CHAT, BODY, CIMultiDict()) as response:
        assert await response.content.readany()
    assert response.closed and upstream_http.pool.open == 0
    async with port.post(CHAT, BODY, CIMultiDict()) as response:
        assert (await port.read(response)).count(b"data: x") >= 1
    assert len(set(seen.peers)) == 2  # the second call did not get the abandoned connection
    assert upstream_http.pool.open == 1  # the one read to its end is kept


async def test_chunked_and_gzip_answers_are_read_whole_and_decoded(
    upstream_http: UpstreamHttp, aiohttp_server: MakeServer
) -> None:
    text = b"chunk " * 5000

    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(text), 1000):
            await response.write(text[start : start + 1000])
        return response

    async def zipped(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(text), headers={"Content-Encoding": "gzip"})

    for handler in (chunked, zipped):
        server, seen = await start(aiohttp_server, handler)
        port = port_for(upstream_http, server)
        assert await call(port) == text
        assert await call(port) == text
        assert len(set(seen.peers)) == 1  # each read to its end, then reused


async def test_a_close_delimited_answer_is_read_to_the_close(upstream_http: UpstreamHttp) -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + b'{"closed": true}'
    async with raw_upstream(answer, then="close") as upstream:
        port = port_for(upstream_http, upstream.base_url)
        assert await call(port) == b'{"closed": true}'
        assert await call(port) == b'{"closed": true}'  # on a new connection
        assert upstream_http.pool.open == 0


async def test_a_stalled_body_is_cut_at_read_timeout(upstream_http: UpstreamHttp, aiohttp_server: MakeServer) -> None:
    async def stall(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": "100"})
        await response.prepare(request)
        await response.write(b"x" * 10)
        await asyncio.sleep(3)
        return response

    server, _ = await start(aiohttp_server, stall)
    port = port_for(upstream_http, server, read_timeout=0.3)
    loop = asyncio.get_running_loop()
    async with port.post(CHAT, BODY, CIMultiDict()) as response:
        started = loop.time()
        with pytest.raises(UpstreamTimeout) as caught:
            await port.read(response)
    assert 0.25 <= loop.time() - started < 2
    assert transport_failure(caught.value) == ("timeout", "SocketTimeoutError")
    assert upstream_http.pool.open == 0


async def test_the_cap_makes_calls_wait_for_a_connection(aiohttp_server: MakeServer) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.1)
        return web.json_response({"ok": True})

    server, seen = await start(aiohttp_server, slow)
    http = UpstreamHttp(Pool(limit=2), aiohttp.ClientSession())
    try:
        port = port_for(http, server)
        assert await asyncio.gather(*(call(port) for _ in range(6))) == [b'{"ok": true}'] * 6
        assert seen.most_active == 2 and len(set(seen.peers)) == 2
        assert http.pool.open == 2
    finally:
        await http.close()


async def test_waiting_for_a_connection_counts_as_connecting(aiohttp_server: MakeServer) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(1)
        return web.json_response({"ok": True})

    server, _ = await start(aiohttp_server, slow)
    http = UpstreamHttp(Pool(limit=1), aiohttp.ClientSession())
    try:
        port = port_for(http, server, connect_timeout=0.2)
        first = asyncio.create_task(call(port))
        await asyncio.sleep(0.05)
        with pytest.raises(UpstreamTimeout) as caught:
            await call(port)
        assert transport_failure(caught.value) == ("timeout", "ConnectionTimeoutError")
        assert await first == b'{"ok": true}'
    finally:
        await http.close()


async def test_a_connection_refused_while_the_pool_is_full_frees_its_place(upstream_http: UpstreamHttp) -> None:
    async with raw_upstream(b"") as upstream:
        dead = upstream.base_url
    port = port_for(upstream_http, dead)
    for _ in range(3):
        with pytest.raises(UpstreamUnavailable) as caught:
            await call(port)
        assert transport_failure(caught.value) == ("connection", "ClientConnectorError")
    assert upstream_http.pool.open == 0


@pytest.mark.parametrize(
    ("name", "value"),
    [("X-Note", "a\r\nX-Injected: 1"), ("X-Note", "a\nb"), ("X-Bad Name", "secret"), ("X-Note", "a\x00b")],
)
async def test_a_header_that_would_split_the_head_is_refused(
    upstream_http: UpstreamHttp, aiohttp_server: MakeServer, name: str, value: str
) -> None:
    server, seen = await start(aiohttp_server, ok)
    port = port_for(upstream_http, server)
    with pytest.raises(BadRequest) as caught:
        async with port.post(CHAT, BODY, CIMultiDict({name: value})):
            pass
    assert caught.value.code == "invalid_header"
    assert value not in str(caught.value)
    assert seen.peers == []  # nothing sent
    assert await call(port) == b'{"ok": true}'


@given(
    base=st.sampled_from(
        ["http://127.0.0.1:8080/v1", "https://api.openai.com/v1", "https://h:443/v1", "http://[::1]:9/x/v1", "http://h"]
    ),
    tail=st.sampled_from(["/chat/completions", "/models/gpt-4o", "/a%20b"]),
    query=st.sampled_from(["", "a=1", "x=%26&y=%2520"]),
)
def test_the_target_is_upstream_urls(base: str, tail: str, query: str) -> None:
    upstream = UpstreamConfig.model_validate({"base_url": base})
    url = upstream_url(upstream, tail, query)
    origin, target = upstream_target(upstream, tail, query)
    assert (origin.scheme, origin.host, origin.port) == (url.scheme, url.raw_host, url.port)
    assert target == url.raw_path_qs
    assert origin.host_header == url.host_port_subcomponent


async def test_tls_with_a_trusted_certificate(aiohttp_server: MakeServer, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    server, seen = await start(aiohttp_server, ok, ssl=served)
    base = f"https://localhost:{server.port}/v1"
    trusting = UpstreamHttp(Pool(tls=ssl.create_default_context(cafile=str(cert))), aiohttp.ClientSession())
    default = UpstreamHttp(Pool(), aiohttp.ClientSession())
    try:
        port = port_for(trusting, base)
        assert await call(port) == b'{"ok": true}'
        assert await call(port) == b'{"ok": true}'
        assert len(set(seen.peers)) == 1
        with pytest.raises(UpstreamUnavailable) as caught:  # the system's CAs do not know it
            await call(port_for(default, base))
        assert transport_failure(caught.value) == ("connection", "ClientConnectorCertificateError")
    finally:
        await trusting.close()
        await default.close()


CLIENT_HEADER_SETS = [
    {},
    {"Authorization": "Bearer sk-client", "Accept": "application/json", "X-Ctx-Trace": "1", "Host": "evil.example"},
    {"Accept-Encoding": "br", "Connection": "keep-alive, X-Hop", "X-Hop": "1", "Cookie": "a=b", "X-Odd": "caf\u00e9"},
    {"Content-Type": "text/plain", "User-Agent": "client/1", "x-api-key": "k", "Content-Length": "3"},
]


@pytest.mark.parametrize("client", CLIENT_HEADER_SETS)
@pytest.mark.parametrize("query", ["", "api-version=2024-01&x=%26"])
async def test_the_upstream_sees_what_aiohttps_client_sent(
    upstream_http: UpstreamHttp, aiohttp_server: MakeServer, client: dict[str, str], query: str
) -> None:
    """The same request, through the port and through a ``ClientSession`` set up as ctxproxy's
    was (no User-Agent, no cookies), reaches the upstream as the same head and body."""
    received: list[tuple[str, list[tuple[str, str]], bytes]] = []

    async def record(request: web.Request) -> web.Response:
        headers = sorted((name.lower(), value) for name, value in request.headers.items())
        received.append((request.raw_path, headers, await request.read()))
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", record)
    server = await aiohttp_server(app)
    tenant = UpstreamConfig.model_validate(
        {"base_url": str(server.make_url("/v1")), "api_key": "sk-tenant", "headers": {"X-Org": "o"}}
    )
    port = UpstreamPort(upstream_http, tenant)
    async with port.post(CHAT, BODY, CIMultiDict(client), raw_query=query) as response:
        assert response.status == 200
    headers = upstream_request_headers(CIMultiDict(client), tenant, decode_body=True)
    headers.setdefault("Content-Type", "application/json")
    session = upstream_http.session  # aiohttp's client, as ctxproxy set it up for every call before
    async with session.post(upstream_url(tenant, CHAT, query), data=BODY, headers=headers) as answer:
        assert answer.status == 200
    ours, aiohttps = received
    assert ours == aiohttps


async def test_an_informational_answer_is_passed_over(upstream_http: UpstreamHttp) -> None:
    answer = b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    async with raw_upstream(answer, then="keep") as upstream:
        port = port_for(upstream_http, upstream.base_url)
        assert await call(port) == b"{}"
        assert await call(port) == b"{}"
        assert len(upstream.requests) == 2 and upstream_http.pool.open == 1


async def test_a_shorter_read_timeout_holds_on_a_connection_kept_from_a_longer_one(
    upstream_http: UpstreamHttp, aiohttp_server: MakeServer
) -> None:
    async def stall_when_asked(request: web.Request) -> web.Response:
        if request.headers.get("X-Stall"):
            await asyncio.sleep(3)
        return web.json_response({"ok": True})

    server, seen = await start(aiohttp_server, stall_when_asked)
    patient = port_for(upstream_http, server, read_timeout=600)
    hasty = port_for(upstream_http, server, read_timeout=0.3)
    assert await call(patient) == b'{"ok": true}'
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(UpstreamTimeout):
        async with hasty.post(CHAT, BODY, CIMultiDict({"X-Stall": "1"})):
            pass
    assert loop.time() - started < 2
    assert len(set(seen.peers)) == 1  # the same connection, kept from the patient call


@given(
    name=st.text(st.characters(codec="ascii"), min_size=1, max_size=12),
    value=st.text(max_size=20),
)
def test_a_head_is_refused_exactly_when_a_header_could_split_it(name: str, value: str) -> None:
    splits = any(c in value for c in "\r\n\0") or not all(c.isalnum() or c in "!#$%&'*+-.^_`|~" for c in name)
    try:
        head = request_head("/v1/x", "h", CIMultiDict({name: value}), 2)
    except BadRequest:
        assert splits
        return
    assert not splits
    lines = head.decode("utf-8", "surrogateescape").split("\r\n")
    assert lines == ["POST /v1/x HTTP/1.1", "Host: h", f"{name}: {value}", "Content-Length: 2", "", ""]


@pytest.mark.parametrize(
    "content_type",
    [None, "application/json", "Text/Event-Stream; charset=utf-8", "text", "", "application/json ; x=1", "a/b/c"],
)
async def test_the_media_type_is_aiohttps(
    upstream_http: UpstreamHttp, aiohttp_server: MakeServer, content_type: str | None
) -> None:
    async def typed(request: web.Request) -> web.Response:
        response = web.Response(body=b"{}")
        if content_type is None:
            response.headers.popall("Content-Type", None)
        else:
            response.headers["Content-Type"] = content_type
        return response

    server, _ = await start(aiohttp_server, typed)
    async with port_for(upstream_http, server).post(CHAT, BODY, CIMultiDict()) as ours:
        mine = ours.content_type
    async with upstream_http.session.post(server.make_url("/v1/chat/completions"), data=BODY) as aiohttps:
        assert mine == aiohttps.content_type


async def test_a_connection_idle_past_keepalive_is_not_used(aiohttp_server: MakeServer) -> None:
    server, seen = await start(aiohttp_server, ok)
    http = UpstreamHttp(Pool(keepalive=0.2), aiohttp.ClientSession())
    try:
        port = port_for(http, server)
        await call(port)
        await call(port)  # at once: kept
        await asyncio.sleep(0.3)
        await call(port)  # idle too long: closed, a new one
        assert len(seen.peers) == 3 and len(set(seen.peers)) == 2
        assert http.pool.open == 1
    finally:
        await http.close()


async def test_a_connection_that_is_not_accepted_in_time_is_a_timeout(upstream_http: UpstreamHttp) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)  # never accepted: once its queue is full, a connection's setup hangs
        address = listener.getsockname()
        fillers = [socket.socket() for _ in range(3)]
        for filler in fillers:
            filler.setblocking(False)
            filler.connect_ex(address)
        try:
            port = port_for(upstream_http, f"http://127.0.0.1:{address[1]}/v1", connect_timeout=0.3)
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(UpstreamTimeout) as caught:
                await call(port)
            assert 0.25 <= loop.time() - started < 2
            assert transport_failure(caught.value) == ("timeout", "ConnectionTimeoutError")
            assert upstream_http.pool.open == 0
        finally:
            for filler in fillers:
                filler.close()

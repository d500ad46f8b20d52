"""A client that stops sending is cut after ``server.read_timeout``; everyone else is served.

A body shorter than its Content-Length (or a chunked body that stops) gets a 408 OpenAI-shaped
error and a closed connection; headers that trickle in and never finish, or a connection that
never sends anything, are closed. A body that keeps arriving, however slowly, is not cut.
"""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.raw_http import parse_response, read_until_closed

READ_TIMEOUT = 1.0
BOUND = 5.0  # the cut must come well within this, however loaded the machine
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}]}).encode()


@pytest.fixture
async def proxy(make_proxy: MakeProxy) -> Proxy:
    return await make_proxy(proxy_toml=f"[server]\nread_timeout = {READ_TIMEOUT}\n")


async def open_raw(proxy: Proxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(proxy.server.host, proxy.server.port)


def head(path: str, **headers: str | int) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: proxy", "Content-Type: application/json"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def healthz(proxy: Proxy) -> int:
    async with aiohttp.ClientSession() as http, http.get(proxy.url("/healthz")) as resp:
        return resp.status


async def cut_after_stall(proxy: Proxy, request: bytes) -> tuple[bytes, float]:
    """Send ``request``, then nothing: what the server sends until it closes, and how long that took.
    Meanwhile another client is served."""
    reader, writer = await open_raw(proxy)
    try:
        writer.write(request)
        await writer.drain()
        started = time.monotonic()
        stalled = asyncio.create_task(read_until_closed(reader, BOUND))
        assert await healthz(proxy) == 200
        assert not stalled.done(), "the stalled request was answered before the read timeout"
        raw = await stalled
        return raw, time.monotonic() - started
    finally:
        writer.close()


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/t/default/v1/chat/completions"])
async def test_a_body_shorter_than_its_content_length_gets_408(proxy: Proxy, upstream: Upstream, path: str) -> None:
    raw, elapsed = await cut_after_stall(proxy, head(path, Content_Length=len(BODY) + 100) + BODY)
    assert READ_TIMEOUT * 0.9 <= elapsed < BOUND
    response = parse_response(raw)
    assert response.status == 408
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["connection"].lower() == "close"
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "request_timeout"
    assert "read_timeout" in error["message"]
    assert upstream.fake.requests == []
    assert await healthz(proxy) == 200


async def test_a_chunked_body_that_stops_gets_408(proxy: Proxy, upstream: Upstream) -> None:
    request = head("/v1/chat/completions", Transfer_Encoding="chunked") + b"%x\r\n%s\r\n" % (len(BODY[:10]), BODY[:10])
    raw, elapsed = await cut_after_stall(proxy, request)
    assert elapsed < BOUND
    assert parse_response(raw).status == 408
    assert upstream.fake.requests == []


async def test_a_stalled_upload_on_a_relayed_path_is_cut(proxy: Proxy, upstream: Upstream) -> None:
    raw, elapsed = await cut_after_stall(proxy, head("/v1/files", Content_Length=1000) + b"x" * 10)
    assert elapsed < BOUND
    # The upload was being relayed when it stalled: the client is still told the real cause.
    response = parse_response(raw)
    assert response.status == 408, raw[:300]
    assert response.json()["error"]["code"] == "request_timeout"


async def test_headers_that_never_finish_are_cut(proxy: Proxy) -> None:
    reader, writer = await open_raw(proxy)
    started = time.monotonic()
    closed = asyncio.create_task(read_until_closed(reader, BOUND))
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\n")
    n = 0
    try:
        while not closed.done():  # one more header line every 50 ms, never the blank line
            writer.write(b"X-Trickle-%d: 1\r\n" % n)
            n += 1
            await asyncio.wait({closed}, timeout=0.05)
    except ConnectionError:
        pass
    finally:
        writer.close()
    assert await closed == b""
    assert READ_TIMEOUT * 0.9 <= time.monotonic() - started < BOUND
    assert n > 5  # bytes really kept arriving while the server waited
    assert await healthz(proxy) == 200


async def test_a_connection_that_sends_nothing_is_closed(proxy: Proxy) -> None:
    reader, writer = await open_raw(proxy)
    started = time.monotonic()
    try:
        assert await read_until_closed(reader, BOUND) == b""
    finally:
        writer.close()
    assert READ_TIMEOUT * 0.9 <= time.monotonic() - started < BOUND


async def test_a_body_that_keeps_arriving_is_not_cut(proxy: Proxy, upstream: Upstream) -> None:
    reader, writer = await open_raw(proxy)
    started = time.monotonic()
    try:
        writer.write(head("/v1/chat/completions", Content_Length=len(BODY), Connection="close"))
        pieces = [BODY[i : i + 4] for i in range(0, len(BODY), 4)]
        for piece in pieces:  # a slow client: each piece well within the timeout, the whole well beyond it
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(READ_TIMEOUT / 10)
        response = parse_response(await read_until_closed(reader, BOUND))
    finally:
        writer.close()
    assert time.monotonic() - started > 1.5 * READ_TIMEOUT
    assert response.status == 200, response.body
    assert response.json()["choices"][0]["message"]["content"] == "echo: hello"


async def test_a_body_that_stops_after_trickling_is_cut_a_timeout_after_its_last_byte(proxy: Proxy) -> None:
    """One timer keeps the bound (re-armed when it fires, not at every packet): the cut still
    comes ``read_timeout`` after the newest byte, not after the first."""
    reader, writer = await open_raw(proxy)
    try:
        writer.write(head("/v1/chat/completions", Content_Length=len(BODY)))
        for piece in (BODY[i : i + 4] for i in range(0, 24, 4)):  # 0.6 timeouts of trickle, then silence
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(READ_TIMEOUT / 10)
        last = time.monotonic() - READ_TIMEOUT / 10
        response = parse_response(await read_until_closed(reader, BOUND))
    finally:
        writer.close()
    assert READ_TIMEOUT * 0.9 <= time.monotonic() - last < BOUND
    assert response.status == 408, response.body
    assert response.json()["error"]["code"] == "request_timeout"


def test_the_default_read_timeout_is_30_seconds() -> None:
    from ctxproxy.config.models import ServerSettings

    assert ServerSettings().read_timeout == 30.0

"""A whole answer is sent before the request's bookkeeping (``ctxproxy.server.middleware``): the
log line, the metrics and what the handler left for after the answer (the session's record)
follow it, and none of them is lost when the client closes its connection the moment it has
the answer, nor when the handler is cancelled before it answers."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from ctxproxy.server.middleware import request_context
from ctxproxy.services import AFTER_ANSWER
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.logs.lines import capture, request_lines
from tests.metrics.scrape import scrape
from tests.raw_http import parse_response, read_until_closed

ADMIN = '[admin]\napi_key = "${ADMIN_KEY}"\n'
KEY = {"Authorization": "Bearer s3cret"}
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}]}).encode()


def raw_post(path: str, body: bytes, *, close: bool) -> bytes:
    connection = "Connection: close\r\n" if close else ""
    head = f"POST {path} HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n{connection}"
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def read_answer(reader: asyncio.StreamReader) -> bytes:
    """One whole HTTP/1.1 answer with a Content-Length, and not a byte more."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    return head + await reader.readexactly(length)


async def sessions(proxy: Proxy) -> list[Any]:
    async with aiohttp.ClientSession() as http:
        for _ in range(50):  # session records are written in batches off the request path
            async with http.get(proxy.url("/admin/tenants/default/sessions"), headers=KEY) as resp:
                listed = (await resp.json())["data"]
            if listed:
                return list(listed)
            await asyncio.sleep(0.05)
    return []


async def test_a_client_that_closes_once_answered_loses_no_bookkeeping(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy(proxy_toml=ADMIN, env={"ADMIN_KEY": "s3cret"})
    with capture() as logs:
        reader, writer = await asyncio.open_connection(proxy.server.host, proxy.server.port)
        writer.write(raw_post("/v1/chat/completions", BODY, close=False))
        await writer.drain()
        answer = parse_response(await read_answer(reader))
        writer.close()  # at once: the handler may still be running
        [line] = await request_lines(logs, 1)
    assert answer.status == 200 and answer.json()["choices"][0]["message"]["content"] == "echo: hello"
    assert line["status"] == 200 and "error_code" not in line
    assert line["tokens_after"] == int(answer.headers["x-ctx-tokens-after"])
    metrics = await scrape(proxy.url("/metrics"))
    assert metrics.total("ctxproxy_requests_total", route="/v1/chat/completions", status="200") == 1
    [session] = await sessions(proxy)
    assert session["session"] == answer.headers["x-ctx-session"] and session["requests"] == 1


async def test_a_request_leaves_no_cycle_for_the_collector(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """What is kept for after the answer holds the request: it is let go once run, so a request
    is freed when it ends, not at the collector's next pass (which walks every object it holds)."""
    proxy = await make_proxy()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(3):
                async with http.post(proxy.url("/v1/chat/completions"), data=BODY) as resp:
                    assert resp.status == 200, await resp.text()
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, web.BaseRequest)]
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()
    assert left == []


async def test_an_error_answer_is_sent_first_and_logged(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy()
    with capture() as logs:
        reader, writer = await asyncio.open_connection(proxy.server.host, proxy.server.port)
        writer.write(raw_post("/v1/chat/completions", b'{"model": "m", "messages": 3}', close=True))
        await writer.drain()
        answer = parse_response(await read_until_closed(reader, 5.0))
        writer.close()
        [line] = await request_lines(logs, 1)
    assert answer.status == 400 and answer.json()["error"]["type"] == "invalid_request_error"
    assert line["status"] == 400 and line["error_code"] == answer.json()["error"]["code"]


class Probe:
    """A handler answering as ctxproxy's do, with a step for after its answer that notes what the
    client had been sent by then."""

    def __init__(self) -> None:
        self.written_before: list[int] = []
        self.entered = asyncio.Event()

    async def answer(self, request: web.Request) -> web.Response:
        request[AFTER_ANSWER].append(lambda: self.written_before.append(request.writer.output_size))
        return web.json_response({"ok": True})

    async def hang(self, request: web.Request) -> web.Response:
        request[AFTER_ANSWER].append(lambda: self.written_before.append(request.writer.output_size))
        self.entered.set()
        await asyncio.sleep(30)
        raise AssertionError("not cancelled")


async def probe_server(probe: Probe) -> TestServer:
    app = web.Application(middlewares=[request_context])
    app.router.add_get("/answer", probe.answer)
    app.router.add_get("/hang", probe.hang)
    server = TestServer(app, handler_cancellation=True)
    await server.start_server()
    return server


async def test_what_follows_the_answer_runs_once_it_was_written() -> None:
    probe = Probe()
    server = await probe_server(probe)
    try:
        with capture() as logs:
            async with aiohttp.ClientSession() as http:
                for _ in range(2):  # a kept-alive connection serves the next request as before
                    async with http.get(server.make_url("/answer")) as resp:
                        assert resp.status == 200 and await resp.json() == {"ok": True}
            lines = await request_lines(logs, 2)
    finally:
        await server.close()
    assert len(probe.written_before) == 2 and all(size > 0 for size in probe.written_before)
    assert [line["status"] for line in lines] == [200, 200]


async def test_what_follows_the_answer_runs_when_the_handler_is_cancelled() -> None:
    probe = Probe()
    server = await probe_server(probe)
    try:
        with capture() as logs:
            reader, writer = await asyncio.open_connection(server.host, server.port)
            writer.write(f"GET /hang HTTP/1.1\r\nHost: {server.host}\r\n\r\n".encode())
            await writer.drain()
            await asyncio.wait_for(probe.entered.wait(), 5)
            writer.close()  # the client leaves: the handler is cancelled
            [line] = await request_lines(logs, 1)
    finally:
        await server.close()
    assert probe.written_before == [0]  # nothing was answered, and the step still ran
    assert line["status"] == 499 and line["error_code"] == "client_closed"

"""Upstream failures: timeouts, refused and reset connections, rate limits, odd error pages and
clients that give up. Each becomes the right status for the client, never leaks where the
upstream is or what key it takes, and leaves the proxy serving."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from multidict import CIMultiDictProxy

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.fakes.upstream import openai_error

API_KEY = "sk-tenant-secret-0123456789"
USER = {"role": "user", "content": "hello there"}
CHAT = {"model": "gpt-4o-mini", "messages": [USER]}
CHAT_STREAM = {**CHAT, "stream": True}
EMBED = {"model": "text-embedding-3-small", "input": "hello"}


def tenant(**upstream: Any) -> str:
    lines = ["[upstream]", 'base_url = "{upstream}"', f'api_key = "{API_KEY}"']
    lines += [f"{name} = {value}" for name, value in upstream.items()]
    return "\n".join(lines) + "\n"


def closed_port() -> int:
    """A loopback port nobody listens on (bound, noted, closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def send(proxy: Proxy, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], CIMultiDictProxy[str]]:
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url(path), json=body, headers={"Authorization": "Bearer sk-client"}) as resp:
            return resp.status, orjson.loads(await resp.read()), resp.headers


def assert_proxy_error(status: int, body: dict[str, Any], expected_status: int, code: str, *, port: int) -> None:
    """The proxy's own OpenAI-shaped upstream error, with nothing about the upstream in it."""
    assert status == expected_status
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "upstream_error"
    assert error["code"] == code
    assert error["param"] is None
    assert error["message"]
    text = orjson.dumps(body).decode()
    for secret in ("127.0.0.1", "localhost", f":{port}", API_KEY, "sk-client", "http://"):
        assert secret not in text, secret


async def assert_still_serving(proxy: Proxy, path: str = "/v1/chat/completions") -> None:
    status, body, _ = await send(proxy, path, CHAT if path.endswith("/chat/completions") else EMBED)
    assert status == 200
    if path.endswith("/chat/completions"):
        assert body["choices"][0]["message"]["content"] == "echo: hello there"
    else:
        assert body["path"] == "/v1/embeddings"


# ---------------------------------------------------------------------------- read timeout → 504


@pytest.mark.parametrize(
    ("path", "body", "then"),
    [
        ("/v1/chat/completions", CHAT, "json"),
        ("/v1/chat/completions", CHAT_STREAM, "stream"),  # a stream that stalls before its headers
        ("/v1/embeddings", EMBED, "json"),
    ],
    ids=["chat", "chat-stream", "passthrough"],
)
async def test_read_timeout_is_504(
    make_proxy: MakeProxy, upstream: Upstream, path: str, body: dict[str, Any], then: str
) -> None:
    proxy = await make_proxy({"default": tenant(read_timeout=0.3)})
    upstream.fake.for_path(path).reply_delay(2, then=then)  # type: ignore[arg-type]
    started = time.monotonic()
    status, answer, headers = await send(proxy, path, body)
    assert time.monotonic() - started >= 0.3  # it did wait for the upstream, read_timeout long
    assert headers["Content-Type"].startswith("application/json")
    assert_proxy_error(status, answer, 504, "upstream_timeout", port=upstream.server.port)
    assert len(upstream.fake.requests) == 1  # the request did reach the upstream
    await assert_still_serving(proxy, path)


async def test_read_timeout_seen_by_openai_sdk(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant(read_timeout=0.3)})
    upstream.fake.reply_delay(2)
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=0) as client:
        with pytest.raises(openai.InternalServerError) as caught:
            await client.chat.completions.create(model="gpt-4o-mini", messages=[USER])
    assert caught.value.status_code == 504
    assert caught.value.code == "upstream_timeout"
    assert caught.value.type == "upstream_error"


async def test_passthrough_body_stall_truncates_the_client_body(make_proxy: MakeProxy, upstream: Upstream) -> None:
    # Headers and a first event arrive, then the upstream goes quiet for longer than read_timeout.
    proxy = await make_proxy({"default": tenant(read_timeout=0.3)})
    upstream.fake.for_path("/v1/completions").reply_stream(["a ", "b "], delay=2)
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/completions"), json={"model": "gpt-4o-mini", "prompt": "x"}) as resp:
            assert resp.status == 200
            with pytest.raises(aiohttp.ClientPayloadError):
                await resp.read()
    await assert_still_serving(proxy, "/v1/embeddings")


# ---------------------------------------------------------------------------- refused / reset → 502


@pytest.mark.parametrize(
    ("path", "body"), [("/v1/chat/completions", CHAT), ("/v1/embeddings", EMBED)], ids=["chat", "passthrough"]
)
async def test_connection_refused_is_502(
    make_proxy: MakeProxy, upstream: Upstream, path: str, body: dict[str, Any]
) -> None:
    port = closed_port()
    dead = f'[upstream]\nbase_url = "http://127.0.0.1:{port}/v1"\napi_key = "{API_KEY}"\nconnect_timeout = 2\n'
    proxy = await make_proxy({"default": tenant(), "dead": dead})
    status, answer, _ = await send(proxy, "/t/dead" + path, body)
    assert_proxy_error(status, answer, 502, "upstream_connection_error", port=port)
    assert "connect" in answer["error"]["message"].lower()
    await assert_still_serving(proxy, path)  # the default tenant, whose upstream is up


@pytest.mark.parametrize(
    ("path", "body"),
    [("/v1/chat/completions", CHAT), ("/v1/chat/completions", CHAT_STREAM), ("/v1/embeddings", EMBED)],
    ids=["chat", "chat-stream", "passthrough"],
)
async def test_connection_reset_is_502(
    make_proxy: MakeProxy, upstream: Upstream, path: str, body: dict[str, Any]
) -> None:
    proxy = await make_proxy({"default": tenant()})
    upstream.fake.for_path(path).reply_reset()
    status, answer, _ = await send(proxy, path, body)
    assert_proxy_error(status, answer, 502, "upstream_connection_error", port=upstream.server.port)
    assert upstream.fake.pending == 0  # the reset was what the proxy met
    await assert_still_serving(proxy, path)


# ---------------------------------------------------------------------------- 429 / 503 relayed


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (429, openai_error("Rate limit reached for gpt-4o-mini.", type="requests", code="rate_limit_exceeded")),
        (503, openai_error("The engine is currently overloaded, please try again later.", type="server_error")),
    ],
    ids=["429", "503"],
)
@pytest.mark.parametrize(
    ("path", "body"),
    [("/v1/chat/completions", CHAT), ("/v1/chat/completions", CHAT_STREAM), ("/v1/embeddings", EMBED)],
    ids=["chat", "chat-stream", "passthrough"],
)
async def test_retry_after_errors_relayed(
    proxy: Proxy, upstream: Upstream, path: str, body: dict[str, Any], status: int, error: dict[str, Any]
) -> None:
    upstream.fake.for_path(path).reply_error(
        status, error, headers={"Retry-After": "7", "x-ratelimit-remaining-requests": "0"}
    )
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url(path), json=body) as resp:
            assert resp.status == status
            assert resp.headers["Retry-After"] == "7"
            assert resp.headers["x-ratelimit-remaining-requests"] == "0"
            assert resp.headers["x-request-id"] == "req_1"
            assert resp.content_type == "application/json"
            assert await resp.read() == orjson.dumps(error)
    await assert_still_serving(proxy, path)


async def test_429_seen_by_openai_sdk_with_retry_after(proxy: Proxy, upstream: Upstream) -> None:
    error = openai_error("Rate limit reached.", type="requests", code="rate_limit_exceeded")
    upstream.fake.reply_error(429, error, headers={"Retry-After": "3"})
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=0) as client:
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(model="gpt-4o-mini", messages=[USER], stream=True)
    assert caught.value.status_code == 429
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.response.headers["retry-after"] == "3"


@pytest.mark.parametrize(
    ("path", "body"), [("/v1/chat/completions", CHAT), ("/v1/embeddings", EMBED)], ids=["chat", "passthrough"]
)
async def test_non_json_502_page_relayed_as_is(
    proxy: Proxy, upstream: Upstream, path: str, body: dict[str, Any]
) -> None:
    page = "<html><head><title>502 Bad Gateway</title></head><body>cloudflare</body></html>\n"
    upstream.fake.for_path(path).reply_error(502, page)
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url(path), json=body) as resp:
            assert resp.status == 502
            assert resp.content_type == "text/plain"
            assert await resp.text() == page
    await assert_still_serving(proxy, path)


# ---------------------------------------------------------------------------- client gives up


@pytest.mark.parametrize(
    ("path", "body"), [("/v1/chat/completions", CHAT), ("/v1/embeddings", EMBED)], ids=["chat", "passthrough"]
)
async def test_client_disconnect_cancels_upstream_call(
    proxy: Proxy, upstream: Upstream, path: str, body: dict[str, Any]
) -> None:
    upstream.fake.for_path(path).reply_delay(5)

    async def call(http: aiohttp.ClientSession) -> bytes:
        async with http.post(proxy.url(path), json=body) as resp:
            return await resp.read()

    async with aiohttp.ClientSession() as http:
        task = asyncio.create_task(call(http))
        # Wait until the upstream is "thinking" on this request, then give up.
        async with asyncio.timeout(5):
            while not upstream.fake.requests:
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    # The proxy dropped its upstream call instead of waiting the 5 s out.
    await asyncio.wait_for(upstream.fake.cancelled.wait(), 3)
    assert upstream.fake.cancellations == 1
    await assert_still_serving(proxy, path)

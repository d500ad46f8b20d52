"""Embeddings from the upstream's /v1/embeddings (a real loopback server), and cosine."""

from __future__ import annotations

import asyncio
import json
import math
import socket
from typing import Any

import pytest
import structlog
from aiohttp import web

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.memory.embeddings import cosine, embed
from ctxproxy.upstream.client import UpstreamHttp
from tests.fakes.upstream import FakeUpstream, start_fake_upstream

EMBEDDINGS = "/v1/embeddings"


@pytest.fixture
async def fake(aiohttp_server: Any) -> tuple[FakeUpstream, UpstreamConfig]:
    upstream, server = await start_fake_upstream(aiohttp_server)
    return upstream, UpstreamConfig(base_url=str(server.make_url("/v1")))


def answer(*vectors: list[float], order: list[int] | None = None) -> bytes:
    items = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    if order is not None:
        items = [items[i] for i in order]
    return json.dumps(
        {"object": "list", "data": items, "model": "m", "usage": {"prompt_tokens": 2, "total_tokens": 2}}
    ).encode()


JSON = {"Content-Type": "application/json"}


async def test_vectors_in_input_order(upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, UpstreamConfig]) -> None:
    upstream, config = fake
    upstream.for_path(EMBEDDINGS).reply_raw(200, answer([1.0, 0.0], [0.0, 1.0], order=[1, 0]), headers=JSON)
    got = await embed(upstream_http, config, "text-embedding-3-small", ["first", "second"], "Bearer client-key", 5.0)
    assert got == [[1.0, 0.0], [0.0, 1.0]]
    request = upstream.requests[-1]
    assert request.method == "POST" and request.path == EMBEDDINGS
    assert request.json() == {
        "model": "text-embedding-3-small",
        "input": ["first", "second"],
        "encoding_format": "float",
    }
    assert request.headers["Authorization"] == "Bearer client-key"


async def test_tenant_key_and_headers_win(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, UpstreamConfig]
) -> None:
    upstream, config = fake
    config = UpstreamConfig.model_validate(
        {"base_url": config.base_url, "api_key": "sk-tenant", "headers": {"X-Org": "acme"}}
    )
    upstream.for_path(EMBEDDINGS).reply_raw(200, answer([0.5]), headers=JSON)
    assert await embed(upstream_http, config, "m", ["x"], "Bearer client-key", 5.0) == [[0.5]]
    headers = upstream.requests[-1].headers
    assert headers["Authorization"] == "Bearer sk-tenant" and headers["X-Org"] == "acme"


async def test_no_texts_no_request(upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, UpstreamConfig]) -> None:
    upstream, config = fake
    assert await embed(upstream_http, config, "m", [], None, 5.0) == []
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, b'{"error": {"message": "boom"}}'),
        (200, b"not json"),
        (200, b'{"data": "nope"}'),
        (200, b'{"data": [{"index": 0, "embedding": "AAAA"}]}'),  # base64, never asked for
        (200, b'{"data": [{"index": 0, "embedding": [1.0, "x"]}]}'),
        (
            200,
            b'{"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]}',
        ),  # one text, two vectors
        (200, b'{"data": [{"index": 5, "embedding": [1.0]}]}'),
    ],
)
async def test_failures_give_none_and_are_logged_without_text(
    upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, UpstreamConfig], status: int, body: bytes
) -> None:
    upstream, config = fake
    config = UpstreamConfig.model_validate({"base_url": config.base_url, "api_key": "sk-secret-key"})
    upstream.for_path(EMBEDDINGS).reply_raw(status, body, headers=JSON)
    with structlog.testing.capture_logs() as logs:
        assert await embed(upstream_http, config, "m", ["my private text"], None, 5.0) is None
    assert [entry["event"] for entry in logs] == ["memory.embeddings_failed"]
    assert "my private text" not in repr(logs) and "sk-secret-key" not in repr(logs)


async def test_wrong_count_gives_none(upstream_http: UpstreamHttp, fake: tuple[FakeUpstream, UpstreamConfig]) -> None:
    upstream, config = fake
    upstream.for_path(EMBEDDINGS).reply_raw(200, answer([1.0]), headers=JSON)
    assert await embed(upstream_http, config, "m", ["a", "b"], None, 5.0) is None


async def test_timeout_gives_none(upstream_http: UpstreamHttp, aiohttp_server: Any) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response(body=answer([1.0]), headers=JSON)

    app = web.Application()
    app.router.add_post(EMBEDDINGS, slow)
    server = await aiohttp_server(app)
    config = UpstreamConfig(base_url=str(server.make_url("/v1")))
    with structlog.testing.capture_logs() as logs:
        assert await embed(upstream_http, config, "m", ["x"], None, 0.2) is None
    assert logs[0]["reason"] == "timeout"


async def test_unreachable_upstream_gives_none(upstream_http: UpstreamHttp) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    config = UpstreamConfig(base_url=f"http://127.0.0.1:{port}/v1")
    with structlog.testing.capture_logs() as logs:
        assert await embed(upstream_http, config, "m", ["x"], None, 2.0) is None
    assert logs[0]["reason"] == "transport"


def test_cosine() -> None:
    assert cosine([1.0, 0.0], [1.0, 0.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [0.0, 2.0]) == pytest.approx(0.0)
    assert cosine([1.0, 1.0], [-1.0, -1.0]) == pytest.approx(-1.0)
    assert cosine([3.0, 4.0], [4.0, 3.0]) == pytest.approx(24 / 25)
    assert cosine([0.0, 0.0], [1.0, 1.0]) == 0.0
    assert cosine([1.0], [1.0, 2.0]) == 0.0
    assert not math.isnan(cosine([], []))

"""The Messages API's other paths (``/v1/messages/count_tokens``, ``/v1/messages/batches``, ...)
are relayed as they are, and the errors ctxproxy answers on them itself are Anthropic-shaped:
``{"type": "error", "error": {"type", "message"}, "request_id"}`` with the status that says what
happened, so the real SDK raises the class it raises for that status with ``type`` and
``message`` read from the body. An OpenAI path keeps OpenAI's shape."""

from __future__ import annotations

import gzip
import socket
from typing import Any

import aiohttp
import anthropic
import orjson
import pytest

from tests.anthropic.conftest import MODEL, Claude, MakeProxy, tenant_toml
from tests.fakes.anthropic_upstream import COUNT_PATH

HELLO = [{"role": "user", "content": "Hello"}]


def closed_port() -> int:
    """A loopback port nobody listens on (bound, noted, closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dead_tenant(port: int) -> str:
    return f'[upstream]\nbase_url = "http://127.0.0.1:{port}/v1"\napi_key = "sk-ant-tenant"\n'


def assert_anthropic_error(raised: anthropic.APIStatusError, status: int, kind: str, *, port: int = 0) -> None:
    """The SDK read an Anthropic error object naming the request, and nothing about the upstream."""
    assert raised.status_code == status
    body: Any = raised.body
    assert set(body) == {"type", "error", "request_id"} and body["type"] == "error"
    assert set(body["error"]) == {"type", "message"} and body["error"]["message"]
    assert body["request_id"] == raised.response.headers["X-Ctx-Request-Id"]
    assert raised.type == kind and raised.api_message == body["error"]["message"]
    text = orjson.dumps(body).decode()
    for secret in ("127.0.0.1", f":{port}", "sk-ant-tenant", "sk-ant-client", "http://"):
        assert secret not in text, secret


async def test_count_tokens_against_an_unreachable_upstream(make_proxy: MakeProxy) -> None:
    port = closed_port()
    client, _ = await make_proxy(tenants={"default": dead_tenant(port)})
    with pytest.raises(anthropic.InternalServerError) as caught:
        await client.messages.count_tokens(model=MODEL, messages=HELLO)  # type: ignore[arg-type]
    assert_anthropic_error(caught.value, 502, "api_error", port=port)


async def test_listing_batches_against_an_unreachable_upstream(make_proxy: MakeProxy) -> None:
    port = closed_port()
    client, _ = await make_proxy(tenants={"default": dead_tenant(port)})
    with pytest.raises(anthropic.InternalServerError) as caught:
        await client.messages.batches.list()
    assert_anthropic_error(caught.value, 502, "api_error", port=port)


async def test_count_tokens_timing_out_upstream(make_proxy: MakeProxy, claude: Claude) -> None:
    tenant = tenant_toml(claude).replace("[upstream]\n", "[upstream]\nread_timeout = 0.3\n")
    client, _ = await make_proxy(tenants={"default": tenant})
    claude.fake.for_path(COUNT_PATH).reply_delay(3)
    with pytest.raises(anthropic.APIStatusError) as caught:
        await client.messages.count_tokens(model=MODEL, messages=HELLO)  # type: ignore[arg-type]
    assert_anthropic_error(caught.value, 504, "timeout_error", port=claude.server.port or 0)


async def test_an_unknown_tenant(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await make_proxy(base_path="/t/nobody")
    with pytest.raises(anthropic.NotFoundError) as caught:
        await client.messages.count_tokens(model=MODEL, messages=HELLO)  # type: ignore[arg-type]
    assert_anthropic_error(caught.value, 404, "not_found_error")
    assert claude.fake.requests == []


async def test_a_key_that_is_not_the_tenants(make_proxy: MakeProxy, claude: Claude) -> None:
    """The tenant admits only its own proxy key; the client's ``x-api-key`` is another."""
    tenant = 'api_keys = ["sk-proxy-only"]\n' + tenant_toml(claude, key="sk-ant-tenant")
    client, _ = await make_proxy(tenants={"default": tenant})
    with pytest.raises(anthropic.AuthenticationError) as caught:
        await client.messages.count_tokens(model=MODEL, messages=HELLO)  # type: ignore[arg-type]
    assert_anthropic_error(caught.value, 401, "authentication_error")
    assert claude.fake.requests == []


async def test_a_compressed_body_over_the_limit(make_proxy: MakeProxy, claude: Claude) -> None:
    """A gzip body is read whole to be decoded, and refused once it grows past ``max_body_bytes``."""
    _, url = await make_proxy(proxy_toml="[server]\nmax_body_bytes = 1048576\n")
    big = {"model": MODEL, "messages": [{"role": "user", "content": "x" * 2_000_000}]}
    headers = {"Content-Encoding": "gzip", "Content-Type": "application/json", "x-api-key": "sk-ant-client"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(url + COUNT_PATH, data=gzip.compress(orjson.dumps(big)), headers=headers) as resp,
    ):
        assert resp.status == 413
        answer = await resp.json()
    assert answer["type"] == "error" and answer["error"]["type"] == "request_too_large"
    assert "max_body_bytes" in answer["error"]["message"]
    assert claude.fake.requests == []


async def test_an_openai_path_keeps_openais_shape(make_proxy: MakeProxy) -> None:
    port = closed_port()
    _, url = await make_proxy(tenants={"default": dead_tenant(port)})
    async with aiohttp.ClientSession() as http, http.get(url + "/v1/models") as resp:
        assert resp.status == 502
        answer = await resp.json()
    assert set(answer) == {"error"} and answer["error"]["code"] == "upstream_connection_error"


async def test_a_bug_on_the_messages_route_is_an_anthropic_shaped_500(
    make_proxy: MakeProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception nobody expected (a bug) is answered in the route's protocol too, naming the
    request id, so the anthropic SDK raises its InternalServerError with a readable message."""
    import ctxproxy.server.messages as messages_route

    async def bug(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated bug with sk-ant-client inside")

    monkeypatch.setattr(messages_route, "run_turn", bug)
    client, _ = await make_proxy(tenants={"default": dead_tenant(closed_port())})
    with pytest.raises(anthropic.InternalServerError) as caught:
        await client.messages.create(model=MODEL, max_tokens=10, messages=HELLO)  # type: ignore[arg-type]
    assert_anthropic_error(caught.value, 500, "api_error")
    assert caught.value.response.headers["X-Ctx-Request-Id"] in caught.value.api_message

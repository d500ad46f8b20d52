"""Keys for Messages clients: the tenant's upstream key goes to Anthropic in ``x-api-key`` also on
relayed paths (``/v1/messages/count_tokens``), and a proxy key sent in ``x-api-key`` selects its
tenant, on the Messages route and on relayed paths alike."""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import pytest

from tests.anthropic.conftest import MODEL, Claude, MakeProxy, tenant_toml
from tests.fakes.anthropic_upstream import COUNT_PATH

TENANT_KEY = "sk-ant-tenant"
QUESTION = [{"role": "user", "content": "How many tokens is this?"}]
VERSION = {"anthropic-version": "2023-06-01"}


async def post(url: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.post(url + path, json=body, headers=headers) as resp:
        return resp.status, await resp.json()


async def test_count_tokens_goes_upstream_with_the_tenant_key_in_x_api_key(
    make_proxy: MakeProxy, claude: Claude
) -> None:
    client, url = await make_proxy(key=TENANT_KEY)
    claude.fake.api_key = TENANT_KEY
    counted = await client.messages.count_tokens(model=MODEL, messages=QUESTION)  # type: ignore[arg-type]
    assert counted.input_tokens == claude.fake.prompt_tokens({"model": MODEL, "messages": QUESTION})
    # A client that sends its key in x-api-key, as Claude Code does.
    status, body = await post(
        url,
        "/v1/messages/count_tokens",
        {"model": MODEL, "messages": QUESTION},
        {"x-api-key": "sk-ant-client", **VERSION},
    )
    assert status == 200 and body["input_tokens"] == counted.input_tokens
    relayed = [r for r in claude.fake.requests if r.path == COUNT_PATH]
    assert len(relayed) == len(claude.fake.requests) == 2
    for sent in relayed:
        assert sent.headers.get("x-api-key") == TENANT_KEY and "authorization" not in sent.headers
        assert "sk-ant-client" not in str(dict(sent.headers))


async def two_tenants(
    make_proxy: MakeProxy, claude: Claude, client_key: str, base_path: str = ""
) -> tuple[anthropic.AsyncAnthropic, str]:
    """Tenants ``alpha`` and ``beta``, each with its proxy key (``proxy-<name>``) and its upstream
    key (``sk-ant-<name>``); no ``default``."""
    tenants = {
        name: f'api_keys = ["proxy-{name}"]\n' + tenant_toml(claude, key=f"sk-ant-{name}") for name in ("alpha", "beta")
    }
    return await make_proxy(tenants=tenants, client_key=client_key, base_path=base_path)


def upstream_keys(claude: Claude) -> list[str | None]:
    return [r.headers.get("x-api-key") for r in claude.fake.requests]


async def test_a_proxy_key_selects_its_tenant(make_proxy: MakeProxy, claude: Claude) -> None:
    client, url = await two_tenants(make_proxy, claude, "proxy-beta")
    answer = await client.messages.create(model=MODEL, max_tokens=10, messages=QUESTION)  # type: ignore[arg-type]
    assert answer.content[0].type == "text"
    body = {"model": MODEL, "max_tokens": 10, "messages": QUESTION}
    status, _ = await post(url, "/v1/messages", body, {"x-api-key": "proxy-alpha", **VERSION})
    assert status == 200
    status, _ = await post(url, "/v1/messages/count_tokens", body, {"x-api-key": "proxy-alpha", **VERSION})
    assert status == 200
    assert upstream_keys(claude) == ["sk-ant-beta", "sk-ant-alpha", "sk-ant-alpha"]
    assert not any("proxy-" in str(dict(r.headers)) for r in claude.fake.requests)


@pytest.mark.parametrize("headers", [{"x-api-key": "proxy-gamma"}, {}, {"x-api-key": ""}])
async def test_a_wrong_or_missing_key_is_a_401_in_anthropics_shape(
    make_proxy: MakeProxy, claude: Claude, headers: dict[str, str]
) -> None:
    client, url = await two_tenants(make_proxy, claude, "proxy-beta", base_path="/t/alpha")  # beta's key
    status, body = await post(
        url, "/t/alpha/v1/messages", {"model": MODEL, "max_tokens": 10, "messages": QUESTION}, {**headers, **VERSION}
    )
    assert status == 401 and body["type"] == "error" and body["error"]["type"] == "authentication_error"
    if not headers.get("x-api-key"):  # no key at all: told where a Messages client puts one
        assert "send 'x-api-key: <key>' with one of its api_keys" in body["error"]["message"]
        assert "Authorization" not in body["error"]["message"]
    with pytest.raises(anthropic.AuthenticationError) as caught:
        await client.messages.create(model=MODEL, max_tokens=10, messages=QUESTION)  # type: ignore[arg-type]
    assert caught.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    assert claude.fake.requests == []


@pytest.mark.parametrize("path", ["/t/alpha/v1/messages", "/t/alpha/v1/messages/count_tokens"])
async def test_a_messages_path_without_a_key_names_x_api_key(make_proxy: MakeProxy, claude: Claude, path: str) -> None:
    _, url = await two_tenants(make_proxy, claude, "proxy-beta")
    status, body = await post(url, path, {"model": MODEL, "max_tokens": 10, "messages": QUESTION}, VERSION)
    assert status == 401
    assert (
        body["error"]["message"]
        == "Tenant 'alpha' requires a proxy key: send 'x-api-key: <key>' with one of its api_keys."
    )
    status, body = await post(url, "/t/alpha/v1/chat/completions", {"model": MODEL, "messages": QUESTION}, {})
    assert status == 401  # an OpenAI path: its own header
    assert "send 'Authorization: Bearer <key>' with one of its api_keys" in body["error"]["message"]

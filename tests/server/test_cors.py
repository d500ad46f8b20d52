"""CORS for browser clients, over HTTP: off by default, on for the origins ``[server] cors_origins``
lists. Preflights are answered by ctxproxy and never relayed; answers to a listed origin, JSON and
streams alike, say who may read them and which ``X-Ctx-*`` headers; an upstream's own CORS
headers never reach the client."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from tests.conftest import MakeProxy, Proxy, Upstream

APP = "https://app.example"
OTHER = "https://evil.example"
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello from the browser"}]}
# What the openai SDK sends from a browser, and ctxproxy's own request headers.
ASKED = "authorization, content-type, x-stainless-os, x-stainless-retry-count, x-ctx-user, anthropic-version"
UPSTREAM_CORS = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Credentials": "true"}


def preflight_headers(origin: str, method: str = "POST") -> dict[str, str]:
    return {"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": ASKED}


def cors_headers(headers: aiohttp.typedefs.LooseHeaders) -> dict[str, str]:
    return {k.lower(): v for k, v in dict(headers).items() if k.lower().startswith("access-control-")}


@pytest.fixture
async def cors_proxy(make_proxy: MakeProxy) -> Proxy:
    tenants = {
        "default": '[upstream]\nbase_url = "{upstream}"\n',
        "acme": '[upstream]\nbase_url = "{upstream}"\n',
    }
    return await make_proxy(tenants, proxy_toml=f'[server]\ncors_origins = ["{APP}/"]\n')


# ------------------------------------------------------------------------------------ preflight


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/chat/completions", "/t/acme/v1/messages", "/v1/models"])
async def test_preflight_from_a_listed_origin_is_answered_here(
    cors_proxy: Proxy, upstream: Upstream, path: str
) -> None:
    method = "GET" if path == "/v1/models" else "POST"
    async with aiohttp.ClientSession() as http:
        async with http.options(cors_proxy.url(path), headers=preflight_headers(APP, method)) as resp:
            assert resp.status == 204
            assert await resp.read() == b""
            headers = resp.headers
    assert headers["Access-Control-Allow-Origin"] == APP
    assert method in [m.strip() for m in headers["Access-Control-Allow-Methods"].split(",")]
    allowed = {h.strip().lower() for h in headers["Access-Control-Allow-Headers"].split(",")}
    assert {h.strip() for h in ASKED.split(",")} <= allowed
    assert {"authorization", "content-type", "x-api-key", "anthropic-beta", "x-ctx-scope"} <= allowed
    assert int(headers["Access-Control-Max-Age"]) > 0
    assert "Origin" in headers["Vary"]
    assert upstream.fake.requests == []  # answered by ctxproxy, never relayed


@pytest.mark.parametrize("origin", [OTHER, "null", "https://app.example.evil.example"])
async def test_preflight_from_an_unlisted_origin_is_refused_without_cors_headers(
    cors_proxy: Proxy, upstream: Upstream, origin: str
) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.options(cors_proxy.url("/v1/models"), headers=preflight_headers(origin, "GET")) as resp:
            assert resp.status == 403
            body = await resp.json()
            headers = resp.headers
    assert cors_headers(headers) == {}
    assert body["error"]["type"] == "permission_error"
    assert body["error"]["code"] == "cors_origin_not_allowed"
    assert "cors_origins" in body["error"]["message"]
    assert upstream.fake.requests == []


async def test_cors_is_off_by_default(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_json(headers=UPSTREAM_CORS)
    async with aiohttp.ClientSession() as http:
        async with http.options(proxy.url("/v1/chat/completions"), headers=preflight_headers(APP)) as resp:
            assert resp.status == 403
            refusal = await resp.json()
            assert cors_headers(resp.headers) == {}
        async with http.post(proxy.url("/v1/chat/completions"), json=CHAT, headers={"Origin": APP}) as resp:
            assert resp.status == 200
            await resp.read()
            # Not even the upstream's "*": without cors_origins no page may read the answer.
            assert cors_headers(resp.headers) == {}
            assert "Vary" not in resp.headers
    assert "cors_origins" in refusal["error"]["message"] and "empty" in refusal["error"]["message"]
    assert [r.method for r in upstream.fake.requests] == ["POST"]


async def test_an_options_request_that_is_not_a_preflight_is_handled_as_before(cors_proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.options(cors_proxy.url("/v1/chat/completions"), headers={"Origin": APP}) as resp:
            assert resp.status == 405
            assert resp.headers["Allow"] == "POST"


# ------------------------------------------------------------------------------ actual answers


async def test_json_answer_to_a_listed_origin_names_its_ctx_headers(cors_proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_json(headers=UPSTREAM_CORS)
    async with aiohttp.ClientSession() as http:
        async with http.post(cors_proxy.url("/v1/chat/completions"), json=CHAT, headers={"Origin": APP}) as resp:
            assert resp.status == 200
            body = await resp.json()
            headers = resp.headers
    assert body["choices"][0]["message"]["content"] == "echo: hello from the browser"
    assert headers["Access-Control-Allow-Origin"] == APP  # ours, not the upstream's "*"
    assert "Access-Control-Allow-Credentials" not in headers
    assert "Origin" in headers["Vary"]
    exposed = {h.strip() for h in headers["Access-Control-Expose-Headers"].split(",")}
    ctx = {name for name in headers if name.lower().startswith("x-ctx-")}
    assert {"X-Ctx-Session", "X-Ctx-Tokens-Before", "X-Ctx-Tokens-After", "X-Ctx-Request-Id"} <= ctx
    assert ctx <= exposed
    assert "x-request-id" in {h.lower() for h in exposed}  # the upstream's request id, for bug reports


async def test_streamed_answer_to_a_listed_origin_carries_cors_headers(cors_proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["Hel", "lo ", "browser"], headers=UPSTREAM_CORS)
    pieces = []
    async with aiohttp.ClientSession() as http:
        async with http.post(
            cors_proxy.url("/v1/chat/completions"), json={**CHAT, "stream": True}, headers={"Origin": APP}
        ) as resp:
            assert resp.status == 200
            assert resp.content_type == "text/event-stream"
            headers = resp.headers
            async for line in resp.content:
                if line.startswith(b"data: {"):
                    delta = orjson.loads(line[6:])["choices"][0]["delta"]
                    pieces.append(delta.get("content") or "")
    assert "".join(pieces) == "Hello browser"
    assert headers["Access-Control-Allow-Origin"] == APP
    exposed = {h.strip() for h in headers["Access-Control-Expose-Headers"].split(",")}
    assert {"X-Ctx-Session", "X-Ctx-Request-Id"} <= exposed


async def test_answer_to_an_unlisted_origin_has_no_cors_headers(cors_proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_json(headers=UPSTREAM_CORS)
    async with aiohttp.ClientSession() as http:
        async with http.post(cors_proxy.url("/v1/chat/completions"), json=CHAT, headers={"Origin": OTHER}) as resp:
            assert resp.status == 200  # the server answers; the browser keeps it from the page
            await resp.read()
            headers = resp.headers
    assert cors_headers(headers) == {}
    assert "Origin" in headers["Vary"]  # a cache must not serve this answer to the listed origin


async def test_relayed_answer_gets_ctxproxys_cors_headers_not_the_upstreams(
    cors_proxy: Proxy, upstream: Upstream
) -> None:
    upstream.fake.for_path("/v1/models").reply_error(200, {"object": "list", "data": []}, headers=UPSTREAM_CORS)
    upstream.fake.for_path("/v1/models").reply_error(200, {"object": "list", "data": []}, headers=UPSTREAM_CORS)
    async with aiohttp.ClientSession() as http:
        async with http.get(cors_proxy.url("/t/acme/v1/models"), headers={"Origin": APP}) as resp:
            assert resp.status == 200
            assert await resp.json() == {"object": "list", "data": []}
            listed = cors_headers(resp.headers)
        async with http.get(cors_proxy.url("/v1/models"), headers={"Origin": OTHER}) as resp:
            unlisted = cors_headers(resp.headers)
    assert listed["access-control-allow-origin"] == APP
    assert "access-control-allow-credentials" not in listed
    assert unlisted == {}


async def test_an_error_answer_is_readable_by_a_listed_origin(cors_proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(cors_proxy.url("/t/nobody/v1/chat/completions"), json=CHAT, headers={"Origin": APP}) as r:
            assert r.status == 404
            assert (await r.json())["error"]["code"] == "tenant_not_found"
            assert r.headers["Access-Control-Allow-Origin"] == APP


async def test_any_origin(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy(proxy_toml='[server]\ncors_origins = ["*"]\n')
    async with aiohttp.ClientSession() as http:
        async with http.options(proxy.url("/v1/chat/completions"), headers=preflight_headers(OTHER)) as resp:
            assert resp.status == 204
            assert resp.headers["Access-Control-Allow-Origin"] == "*"
            assert "authorization" in resp.headers["Access-Control-Allow-Headers"].lower()  # "*" never covers it
        async with http.post(proxy.url("/v1/chat/completions"), json=CHAT, headers={"Origin": OTHER}) as resp:
            assert resp.status == 200
            assert resp.headers["Access-Control-Allow-Origin"] == "*"
            assert "Vary" not in resp.headers

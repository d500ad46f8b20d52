"""Base-URL probes (``server.probes``): ``HEAD`` / ``GET`` on ``/`` and ``/t/{tenant}`` answer 200
(``HEAD`` without a body, ``GET`` saying which base URLs to use), need no key and tell nothing of a
tenant but whether it exists; an unknown tenant is a 404 ``tenant_not_found``."""

from __future__ import annotations

import aiohttp
import pytest

from tests.conftest import MakeProxy, Proxy
from tests.metrics.scrape import parse
from tests.raw_http import raw_request

PROXY_KEY = "pk-acme-4f1c2d"
UPSTREAM_KEY = "sk-acme-upstream-9a8b"
TENANTS = {
    "default": '[upstream]\nbase_url = "{upstream}"\n',
    # A tenant behind a proxy key: a probe without it still answers, and says nothing of it.
    "acme": f'api_keys = ["{PROXY_KEY}"]\n[upstream]\nbase_url = "{{upstream}}"\napi_key = "{UPSTREAM_KEY}"\n',
}
ROOT = {"openai": "/v1", "anthropic": "/", "gemini": "/"}
ACME = {"openai": "/t/acme/v1", "anthropic": "/t/acme", "gemini": "/t/acme"}


@pytest.fixture
async def proxy(make_proxy: MakeProxy) -> Proxy:
    return await make_proxy(TENANTS)


@pytest.mark.parametrize(("path", "base_urls"), [("/", ROOT), ("/t/acme", ACME), ("/t/acme/", ACME)])
async def test_get_says_this_is_ctxproxy_and_which_base_urls_to_use(
    proxy: Proxy, path: str, base_urls: dict[str, str]
) -> None:
    async with aiohttp.ClientSession() as http, http.get(proxy.url(path)) as resp:
        assert (resp.status, resp.content_type) == (200, "application/json")
        body = await resp.json()
    assert body["service"] == "ctxproxy" and body["base_urls"] == base_urls
    assert base_urls["openai"] in body["message"] and "ANTHROPIC_BASE_URL" in body["message"]
    # Nothing of the tenant's configuration: not its keys, not its upstream.
    text = str(body)
    for secret in (PROXY_KEY, UPSTREAM_KEY, proxy.holder.current.tenants["acme"].upstream.base_url):
        assert secret not in text


@pytest.mark.parametrize("path", ["/", "/t/acme", "/t/acme/", "/t/default"])
async def test_head_answers_200_without_a_body(proxy: Proxy, path: str) -> None:
    """As Claude Code probes its base URL before each run, with no key."""
    answer = await raw_request(proxy.url(), "HEAD", path.encode())
    assert answer.status == 200
    assert answer.body == b""
    assert answer.headers["content-type"].startswith("application/json")


async def test_the_base_url_given_is_the_one_that_works(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url("/t/acme")) as resp:
            openai = (await resp.json())["base_urls"]["openai"]
        request = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}
        headers = {"Authorization": f"Bearer {PROXY_KEY}"}
        async with http.post(proxy.url(openai + "/chat/completions"), json=request, headers=headers) as resp:
            assert resp.status == 200, await resp.text()


@pytest.mark.parametrize("path", ["/t/nope", "/t/nope/"])
async def test_an_unknown_tenant_is_a_404_in_the_usual_shape(proxy: Proxy, path: str) -> None:
    async with aiohttp.ClientSession() as http, http.get(proxy.url(path)) as resp:
        assert resp.status == 404
        error = (await resp.json())["error"]
    assert error["code"] == "tenant_not_found" and "nope" in error["message"]
    answer = await raw_request(proxy.url(), "HEAD", path.encode())
    assert (answer.status, answer.body) == (404, b"")


async def test_a_probe_is_only_get_or_head(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        for path in ("/", "/t/acme"):
            async with http.post(proxy.url(path), json={}) as resp:
                assert resp.status == 405


async def test_probes_count_under_the_route_slash(proxy: Proxy) -> None:
    """In ``ctxproxy_requests_total``, a probe of ``/t/acme`` is route ``/`` of tenant acme."""
    for path in ("/", "/t/acme", "/t/acme/"):
        await raw_request(proxy.url(), "HEAD", path.encode())
    async with aiohttp.ClientSession() as http, http.get(proxy.url("/metrics")) as resp:
        scraped = parse(await resp.text())
    assert scraped.total("ctxproxy_requests_total", route="/") == 3
    assert scraped.total("ctxproxy_requests_total", route="/", tenant="acme") == 2
    assert "" not in scraped.label_values("ctxproxy_requests_total", "route")

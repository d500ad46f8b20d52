"""Label values stay bounded whatever clients send: models past the limit (or absurdly long) are
``other``, routes are route templates (never a raw path; the well-known relayed routes a value
each), tenants are config names."""

from __future__ import annotations

import aiohttp

from ctxproxy.metrics.recording import MAX_MODEL_CHARS, MODELS_PER_TENANT
from tests.conftest import MakeProxy, Upstream
from tests.metrics.scrape import scrape


async def test_models_fold_into_other_past_the_limit(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy()
    models = [f"model-{n}" for n in range(MODELS_PER_TENANT + 3)] + ["x" * (MAX_MODEL_CHARS + 1), "model-0"]
    async with aiohttp.ClientSession() as http:
        for model in models:
            body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
            async with http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
                assert resp.status == 200
                headers = resp.headers
    per_request = int(headers["X-Ctx-Tokens-Before"])  # every body has the same prompt
    scraped = await scrape(proxy.url("/metrics"))
    labels = scraped.label_values("ctxproxy_prompt_tokens_total", "model")
    # "none": the model-less series every tenant starts with at 0 (Metrics.zero_tenants)
    assert labels == {f"model-{n}" for n in range(MODELS_PER_TENANT)} | {"other", "none"}
    # The three models past the limit and the long name; model-0 again keeps its own label.
    assert scraped.total("ctxproxy_prompt_tokens_total", model="other", stage="before") == 4 * per_request
    assert scraped.total("ctxproxy_prompt_tokens_total", model="model-0", stage="before") == 2 * per_request


async def test_routes_are_templates_and_tenants_config_names(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy(
        {"default": '[upstream]\nbase_url = "{upstream}"\n', "acme": '[upstream]\nbase_url = "{upstream}"\n'}
    )
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as http:
        for path in ("/v1/chat/completions", "/t/acme/v1/chat/completions"):
            async with http.post(proxy.url(path), json=body) as resp:
                assert resp.status == 200
        for path in ("/v1/models/secret-name-1", "/v1/models/secret-name-2"):
            async with http.get(proxy.url(path)) as resp:
                assert resp.status == 200
        async with http.post(proxy.url("/t/nobody/v1/chat/completions"), json=body) as resp:
            assert resp.status == 404
        async with http.get(proxy.url("/no/such/path/xyz")) as resp:
            assert resp.status == 404
    scraped = await scrape(proxy.url("/metrics"))
    routes = scraped.label_values("ctxproxy_requests_total", "route")
    assert {"/v1/chat/completions", "/v1/models", "unmatched"} <= routes
    assert not any("secret" in r or "xyz" in r or "nobody" in r for r in routes)
    assert scraped.label_values("ctxproxy_requests_total", "tenant") <= {"default", "acme", ""}
    assert scraped.total("ctxproxy_requests_total", tenant="acme", route="/v1/chat/completions") == 1
    assert scraped.total("ctxproxy_requests_total", tenant="default", route="/v1/models") == 2
    # The unknown tenant's request has no tenant label value of its own.
    assert scraped.total("ctxproxy_requests_total", tenant="", status="404") == 2


async def test_well_known_relayed_routes_have_their_own_label_and_the_rest_share_one(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy()
    asked = {
        "/v1/embeddings": "/v1/embeddings",
        "/v1/messages/count_tokens": "/v1/messages/count_tokens",
        "/t/default/v1/responses": "/v1/responses",
        "/v1/responses/resp_123/input_items": "/v1/responses",
        "/v1/files/file-abc/content": "/v1/files",
        "/v1/batches": "/v1/batches",
        "/v1/messages/batches/msgbatch_1": "/v1/messages/batches",
        "/v1/audio/speech": "/v1/{tail}",
        "/v1/filesystem": "/v1/{tail}",  # a prefix of a word is not the route
    }
    async with aiohttp.ClientSession() as http:
        for path in asked:
            async with http.post(proxy.url(path), json={"model": "m", "input": "x"}) as resp:
                await resp.read()
    scraped = await scrape(proxy.url("/metrics"))
    for path, route in asked.items():
        assert scraped.total("ctxproxy_requests_total", tenant="default", route=route) >= 1, path
    assert scraped.total("ctxproxy_requests_total", route="/v1/{tail}") == 2
    assert scraped.total("ctxproxy_requests_total", route="/v1/responses") == 2
    assert not any("resp_123" in r or "file-abc" in r for r in scraped.label_values("ctxproxy_requests_total", "route"))

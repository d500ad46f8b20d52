"""``POST /chat/completions`` (no ``/v1``) is answered like ``/v1/chat/completions``: some clients
are configured with a base URL that lacks it. The real openai SDK, pointed at the proxy by base
URL only."""

from __future__ import annotations

import aiohttp
import openai

from tests.conftest import MakeProxy, Proxy, Upstream

MESSAGES = [{"role": "user", "content": "no v1 in my base url"}]


async def test_openai_sdk_with_a_base_url_without_v1(proxy: Proxy, upstream: Upstream) -> None:
    client = openai.AsyncOpenAI(base_url=proxy.url(""), api_key="sk-test", max_retries=0)
    raw = await client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES)
    completion = raw.parse()
    stream = await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
    text = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
    await client.close()
    assert completion.choices[0].message.content == "echo: no v1 in my base url"
    assert raw.headers["X-Ctx-Strategy"] == "none"  # through ctxproxy's pipeline, not relayed blindly
    assert "".join(text) == "echo: no v1 in my base url"
    # Upstream, the request goes where a /v1 request goes, with the client's key.
    sent = upstream.fake.chat_requests()
    assert [r.path for r in sent] == ["/v1/chat/completions"] * 2
    assert sent[0].headers["Authorization"] == "Bearer sk-test"


async def test_tenant_path_without_v1(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy(
        {
            "default": '[upstream]\nbase_url = "http://127.0.0.1:9/v1"\n',  # nothing listens there
            "acme": '[upstream]\nbase_url = "{upstream}"\napi_key = "sk-acme"\n',
        }
    )
    client = openai.AsyncOpenAI(base_url=proxy.url("/t/acme"), api_key="sk-client", max_retries=0)
    completion = await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    await client.close()
    assert completion.choices[0].message.content == "echo: no v1 in my base url"
    [sent] = upstream.fake.chat_requests()
    assert sent.headers["Authorization"] == "Bearer sk-acme"  # the tenant's key: it was acme's route


async def test_other_methods_are_refused_without_v1_too(proxy: Proxy, upstream: Upstream) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url("/chat/completions")) as resp:
            assert resp.status == 405
            assert resp.headers["Allow"] == "POST"
            assert (await resp.json())["error"]["code"] == "method_not_allowed"
        async with http.post(proxy.url("/models")) as resp:  # only the chat path has a /v1-less twin
            assert resp.status == 404
    assert upstream.fake.requests == []

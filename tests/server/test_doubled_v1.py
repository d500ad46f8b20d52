"""A base URL that ends in ``/v1`` given to a client that adds ``/v1`` itself: ``/v1/v1/...`` is
answered by ctxproxy, never relayed, with the base URL to use, in the protocol's own shape."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.conftest import MakeProxy, Proxy, Upstream


async def test_the_anthropic_sdk_given_a_base_url_with_v1_is_told_to_drop_it(proxy: Proxy, upstream: Upstream) -> None:
    client = anthropic.AsyncAnthropic(base_url=proxy.url("/v1"), api_key="sk-ant-client", max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as caught:
        await client.messages.create(model="claude-test-1", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    await client.close()
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"  # Anthropic's shape on a Messages path
    assert body["error"]["type"] == "not_found_error"
    root = proxy.url("").rstrip("/")
    assert body["error"]["message"] == (
        "The path /v1/v1/messages has /v1 twice: the client's base URL ends in /v1 and the client adds /v1 itself. "
        f"Drop the /v1 from the base URL: {root} for the anthropic SDKs and Claude Code "
        f"(the openai SDKs take {root}/v1)."
    )
    assert upstream.fake.requests == []


async def test_a_doubled_v1_on_an_openai_path_and_under_a_tenant_is_openai_shaped(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    tenants = {name: '[upstream]\nbase_url = "{upstream}"\n' for name in ("default", "acme")}
    proxy = await make_proxy(tenants)
    client = openai.AsyncOpenAI(base_url=proxy.url("/t/acme/v1/v1"), api_key="sk-client", max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        await client.models.list()
    await client.close()
    body = caught.value.body
    assert isinstance(body, dict) and body["code"] == "doubled_v1_path"
    assert f"Drop the /v1 from the base URL: {proxy.url('/t/acme')} for the anthropic SDKs" in body["message"]
    assert upstream.fake.requests == []

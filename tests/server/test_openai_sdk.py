"""The real openai SDK, pointed at ctxproxy by base_url only, sync and async."""

from __future__ import annotations

import asyncio

import openai
import orjson
import pytest

from tests.conftest import Proxy, Upstream

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello to the proxy"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "look up",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


async def test_async_sdk_json(proxy: Proxy, upstream: Upstream) -> None:
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    completion = await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert completion.choices[0].message.content == "echo: Say hello to the proxy"
    assert completion.usage is not None and completion.usage.total_tokens > 0
    assert upstream.fake.chat_requests()[0].headers["Authorization"] == "Bearer sk-test"
    await client.close()


async def test_async_sdk_stream_with_usage(proxy: Proxy, upstream: Upstream) -> None:
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    text, usage = [], None
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text.append(chunk.choices[0].delta.content)
        if chunk.usage:
            usage = chunk.usage
    assert "".join(text) == "echo: Say hello to the proxy"
    assert usage is not None and usage.prompt_tokens > 0
    await client.close()


async def test_async_sdk_streamed_tool_call(proxy: Proxy, upstream: Upstream) -> None:
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    messages = [{"role": "user", "content": "CALL_TOOL:lookup please"}]
    stream = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS, stream=True)
    calls: dict[int, dict[str, str]] = {}
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"name": "", "arguments": "", "id": ""})
                call["id"] += delta.id or ""
                if delta.function:
                    call["name"] += delta.function.name or ""
                    call["arguments"] += delta.function.arguments or ""
            finish = choice.finish_reason or finish
    assert finish == "tool_calls"
    assert calls[0]["name"] == "lookup" and calls[0]["arguments"] == '{"q": "x"}'
    # The tool definitions reached the upstream as sent.
    assert upstream.fake.chat_requests()[0].json()["tools"] == TOOLS
    await client.close()


async def test_async_sdk_tool_round_trip(proxy: Proxy, upstream: Upstream) -> None:
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    messages: list = [{"role": "user", "content": "CALL_TOOL:lookup now"}]
    first = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "42"},
        {"role": "user", "content": "and now?"},
    ]
    second = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    assert second.choices[0].message.content == "echo: and now?"
    forwarded = upstream.fake.chat_requests()[1].json()["messages"]
    assert forwarded[1]["tool_calls"][0]["id"] == call.id
    assert forwarded[2] == {"role": "tool", "tool_call_id": call.id, "content": "42"}
    await client.close()


async def test_with_raw_response_exposes_ctx_headers(proxy: Proxy, upstream: Upstream) -> None:
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    raw = await client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES)
    assert raw.headers["x-ctx-strategy"] == "none"
    assert raw.headers["x-ctx-session"].startswith("s_")
    assert int(raw.headers["x-ctx-tokens-before"]) > 5
    assert raw.parse().choices[0].message.content.startswith("echo:")
    await client.close()


async def test_session_header_echoed(proxy: Proxy, upstream: Upstream) -> None:
    client = openai.AsyncOpenAI(
        base_url=proxy.base_url, api_key="sk-test", max_retries=0, default_headers={"X-Session-Id": "chat-1234"}
    )
    raw = await client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES)
    assert raw.headers["x-ctx-session"] == "chat-1234"
    await client.close()


async def test_only_x_session_id_names_a_session_not_the_echoed_x_ctx_session(proxy: Proxy, upstream: Upstream) -> None:
    """``X-Ctx-Session`` is ctxproxy's answer; a client that sends it back names nothing (README
    "How it works": the session is ``X-Session-Id``, else derived from the conversation)."""
    client = openai.AsyncOpenAI(
        base_url=proxy.base_url, api_key="sk-test", max_retries=0, default_headers={"X-Ctx-Session": "chat-5678"}
    )
    raw = await client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=MESSAGES)
    await client.close()
    assert raw.headers["x-ctx-session"].startswith("s_")  # derived, as without the header
    assert "X-Ctx-Session" not in upstream.fake.chat_requests()[0].headers


async def test_sync_sdk_json_and_stream(proxy: Proxy, upstream: Upstream) -> None:
    def run() -> tuple[str, str]:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
        done = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
        pieces = [
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
            if c.choices
        ]
        client.close()
        return done.choices[0].message.content or "", "".join(pieces)

    # The sync client blocks, and the proxy runs on this event loop: give the client a thread.
    json_text, streamed = await asyncio.to_thread(run)
    assert json_text == streamed == "echo: Say hello to the proxy"


async def test_sdk_sees_upstream_rate_limit(proxy: Proxy, upstream: Upstream) -> None:
    upstream.fake.reply_error(
        429,
        {"error": {"message": "Rate limit reached", "type": "requests", "param": None, "code": "rate_limit_exceeded"}},
        headers={"Retry-After": "7"},
    )
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.code == "rate_limit_exceeded"
    await client.close()


async def test_sdk_models_and_embeddings_passthrough(proxy: Proxy, upstream: Upstream) -> None:
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    models = await client.models.list()
    assert [m.id for m in models.data] == ["gpt-4o-mini", "gpt-4o"]
    embedding = {
        "object": "list",
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 2, "total_tokens": 2},
        "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5]}],
    }
    upstream.fake.for_path("/v1/embeddings").reply_raw(
        200, orjson.dumps(embedding), headers={"Content-Type": "application/json"}
    )
    result = await client.embeddings.create(model="text-embedding-3-small", input="hello", encoding_format="float")
    assert result.data[0].embedding == [0.25, -0.5]
    sent = upstream.fake.requests[-1]
    assert sent.path == "/v1/embeddings" and sent.json()["input"] == "hello"
    await client.close()

"""Anthropic's Messages API through ctxproxy, driven by the real ``anthropic`` SDK pointed at the
proxy by base URL only, against a fake of api.anthropic.com that validates like the real one."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import anthropic
import pytest

from tests.anthropic.conftest import MODEL, SENTENCES, Claude, blocks, conversation
from tests.fakes.anthropic_prompt import AnthropicWindow


async def test_json_and_stream_pass_through_untouched(make_proxy: Any, claude: Claude) -> None:
    client, _ = await make_proxy()
    messages = [{"role": "user", "content": "Hello there"}]
    answer = await client.messages.create(model=MODEL, max_tokens=100, system="Be brief.", messages=messages)
    assert answer.content[0].type == "text" and answer.content[0].text == "echo: Hello there"
    sent = claude.fake.message_requests()[0].json()
    assert sent["system"] == "Be brief." and sent["messages"] == messages

    async with client.messages.stream(model=MODEL, max_tokens=100, messages=messages) as stream:
        text = "".join([chunk async for chunk in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "echo: Hello there" and final.stop_reason == "end_turn"
    await client.close()


async def test_a_long_conversation_is_compacted_into_a_valid_messages_body(make_proxy: Any, claude: Claude) -> None:
    client, _ = await make_proxy(window=4_000, strategy="rolling_summary")
    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=200, system="You plan trips.", messages=conversation(30)
    )
    answer = await raw.parse()
    assert answer.content[0].text == "echo: What did we decide about the car?"
    assert raw.headers["X-Ctx-Compacted"] == "1"
    assert int(raw.headers["X-Ctx-Tokens-After"]) < int(raw.headers["X-Ctx-Tokens-Before"])
    sent = claude.fake.message_requests()[-1].json()  # the fake refused anything the real API would
    assert sent["messages"][0]["role"] == "user" and sent["messages"][-1]["content"] == conversation(30)[-1]["content"]
    assert "You plan trips." in json.dumps(sent["system"])
    assert "Context Summary" in json.dumps(sent)
    await client.close()


async def test_tool_use_and_results_stay_together(make_proxy: Any, claude: Claude) -> None:
    client, _ = await make_proxy(window=4_000, strategy="rolling_summary")
    messages = conversation(12)[:-2]
    for i in range(6):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Checking flight {i}."},
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "flights", "input": {"day": i}},
                ],
            }
        )
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": " ".join(SENTENCES)}
        messages.append({"role": "user", "content": [result, {"type": "text", "text": f"And flight {i + 1}?"}]})
    tools = [{"name": "flights", "description": "Find flights", "input_schema": {"type": "object"}}]
    answer = await client.messages.create(model=MODEL, max_tokens=200, messages=messages, tools=tools)
    assert answer.content[0].type == "text"
    sent = claude.fake.message_requests()[-1].json()
    uses = {b["id"] for m in sent["messages"] for b in blocks(m) if b.get("type") == "tool_use"}
    results = {b["tool_use_id"] for m in sent["messages"] for b in blocks(m) if b.get("type") == "tool_result"}
    assert results and results <= uses
    await client.close()


async def test_an_overflow_is_compacted_and_retried_once(make_proxy: Any, claude: Claude) -> None:
    client, _ = await make_proxy(window=1_000_000, strategy="none")
    claude.fake.window = AnthropicWindow(3_000)
    raw = await client.messages.with_raw_response.create(model=MODEL, max_tokens=100, messages=conversation(30))
    assert raw.headers["X-Ctx-Retried"] == "1"
    assert len(claude.fake.message_requests()) == 2
    await client.close()


async def test_errors_come_back_in_anthropics_shape(make_proxy: Any, claude: Claude) -> None:
    client, url = await make_proxy()
    async with aiohttp.ClientSession() as http, http.post(url + "/v1/messages", data=b"{not json") as resp:
        assert resp.status == 400 and (await resp.json())["error"]["type"] == "invalid_request_error"
    assert claude.fake.message_requests() == []
    # What ctxproxy cannot model goes upstream as sent, and the upstream's own error comes back.
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": 5}])  # type: ignore[list-item]
    assert caught.value.body["type"] == "error"  # type: ignore[index]
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert caught.value.response.headers["X-Ctx-Forwarded-As-Sent"] == "messages[0].content"
    assert len(claude.fake.message_requests()) == 1
    await client.close()


async def test_the_tenant_key_replaces_the_clients(make_proxy: Any, claude: Claude) -> None:
    client, _ = await make_proxy(key="sk-ant-tenant")
    claude.fake.api_key = "sk-ant-tenant"
    answer = await client.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert answer.content[0].text == "echo: hi"
    headers = claude.fake.message_requests()[0].headers
    assert headers.get("x-api-key") == "sk-ant-tenant" and "sk-ant-client" not in str(dict(headers))
    await client.close()

"""The real ``openai`` SDK's Responses calls through ctxproxy — sync and async, JSON and streamed,
with function tools and reasoning items — reach the upstream as the SDK sent them and come back as
the upstream answered, with ctxproxy's headers."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import orjson
import pytest

from tests.responses.conftest import MODEL, ResponsesRig
from tests.wire.openai_responses.items import codex_turns, developer, user

TOOLS = [{"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {}}}]
INPUT = [developer("You are Codex."), *codex_turns(2), user("And log 3? CALL_TOOL:exec_command")]


async def test_async_create_with_tools_and_reasoning_items(rig: ResponsesRig) -> None:
    proxy = await rig.proxy()
    rig.fake.reply(calls=[{"name": "exec_command", "arguments": '{"cmd": "grep -c ERROR log3.txt"}'}], reasoning="r")
    raw = await rig.client(proxy).responses.with_raw_response.create(model=MODEL, input=INPUT, tools=TOOLS, store=False,
                                                                      include=["reasoning.encrypted_content"])  # fmt: skip
    answer = raw.parse()
    assert [item.type for item in answer.output] == ["reasoning", "function_call"]
    assert answer.output[1].arguments == '{"cmd": "grep -c ERROR log3.txt"}'
    assert raw.headers["X-Ctx-Tokens-Before"] == raw.headers["X-Ctx-Tokens-After"]
    sent = rig.fake.response_requests()[0]
    assert orjson.loads(sent.body)["input"] == INPUT and sent.headers["Authorization"] == "Bearer sk-client"


async def test_async_stream_events_and_final_response(rig: ResponsesRig) -> None:
    proxy = await rig.proxy()
    rig.fake.reply("Log 3 has 9.", pieces=["Log 3 ", "has 9."], reasoning="counting")
    client = rig.client(proxy)
    async with client.responses.stream(model=MODEL, input=INPUT, tools=TOOLS, store=False) as stream:
        deltas = [event.delta async for event in stream if event.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert deltas == ["Log 3 ", "has 9."] and final.output_text == "Log 3 has 9."
    assert final.usage is not None and final.usage.input_tokens == rig.fake.prompt_tokens(
        orjson.loads(rig.fake.requests[0].body)
    )


async def test_sync_sdk_in_a_thread(rig: ResponsesRig) -> None:
    proxy = await rig.proxy()
    client = rig.sync_client(proxy)

    def run() -> tuple[str, list[str], Any]:
        created = client.responses.create(model=MODEL, input="hello", store=False)
        with client.responses.stream(model=MODEL, input=[user("streamed hello")]) as stream:
            types = [event.type for event in stream]
            final = stream.get_final_response()
        return created.output_text, types, final

    text, types, final = await asyncio.to_thread(run)
    assert text == "echo: hello" and final.output_text == "echo: streamed hello"
    assert types[0] == "response.created" and types[-1] == "response.completed"


async def test_an_upstream_error_is_relayed_as_it_came(rig: ResponsesRig) -> None:
    proxy = await rig.proxy()
    bad = [user("hi"), {"type": "function_call_output", "call_id": "nope", "output": "x"}]
    with pytest.raises(openai.BadRequestError) as raised:
        await rig.client(proxy).responses.create(model=MODEL, input=bad, store=False)
    assert "No tool call found for function call output with call_id nope" in raised.value.message

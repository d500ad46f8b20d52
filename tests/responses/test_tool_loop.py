"""ctxproxy's tools as Responses function tools: offered after the client's when there is something
to recall, their calls answered by ctxproxy and never shown to the client — in JSON and in streams
the SDK reads as one response — with the usage summed over the rounds."""

from __future__ import annotations

import json
from typing import Any

import orjson

from ctxproxy.tools.budget import NO_ROOM
from tests.fakes.responses_upstream import TOO_LONG, openai_error
from tests.protocols.test_recall import PAGED
from tests.recall.paged import RECALL
from tests.responses.conftest import MODEL, ResponsesRig
from tests.wire.openai_responses.items import said, user

TOOLS = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
PAGES = [item for n in range(8) for item in (user(f"Fact {n}: the locker code of room {n} is {4400 + n}. " * 3),
                                             said(f"Noted fact {n}.", n))]  # fmt: skip
INPUT = [*PAGES, user("What is the locker code of room 3?")]
RECALL_ARGS = json.dumps({"page_index": 3})


async def paged_proxy(rig: ResponsesRig) -> Any:
    return await rig.proxy(strategy="paged", extra=PAGED)


async def test_a_call_of_ours_is_answered_and_the_client_sees_one_response(rig: ResponsesRig) -> None:
    proxy = await paged_proxy(rig)
    rig.fake.reply(calls=[{"name": RECALL, "arguments": RECALL_ARGS}], reasoning="look it up")
    rig.fake.reply("Room 3: 4403.", reasoning="found it")
    raw = await rig.client(proxy).responses.with_raw_response.create(model=MODEL, input=INPUT, tools=TOOLS,
                                                                      store=False)  # fmt: skip
    answer = raw.parse()
    assert raw.headers["X-Ctx-Tool-Rounds"] == "1"
    assert [item.type for item in answer.output] == ["reasoning", "message"]  # not ours, nor the reasoning before it
    assert answer.output_text == "Room 3: 4403."
    first, second = (orjson.loads(r.body) for r in rig.fake.response_requests())
    assert [t["name"] for t in first["tools"]][:1] == ["exec_command"] and RECALL in [t["name"] for t in first["tools"]]
    assert "reasoning.encrypted_content" in first["include"]  # store: false — the round's reasoning must go back
    sent_back = second["input"][len(first["input"]) :]
    assert [i["type"] for i in sent_back] == ["reasoning", "function_call", "function_call_output"]
    assert sent_back[2]["call_id"] == sent_back[1]["call_id"] and sent_back[2]["output"].startswith("## Page #3")
    usage = answer.usage
    assert usage is not None and usage.input_tokens == rig.fake.prompt_tokens(first) + rig.fake.prompt_tokens(second)


async def test_a_streamed_tool_round_reads_as_one_response_in_the_sdk(rig: ResponsesRig) -> None:
    proxy = await paged_proxy(rig)
    rig.fake.reply("Let me check. ", calls=[{"name": RECALL, "arguments": RECALL_ARGS}], reasoning="look")
    rig.fake.reply("Room 3: 4403.", pieces=["Room 3: ", "4403."], reasoning="found")
    client = rig.client(proxy)
    async with client.responses.stream(model=MODEL, input=INPUT, tools=TOOLS, store=False) as stream:
        events = [event async for event in stream]
        final = await stream.get_final_response()
    types = [e.type for e in events]
    assert types.count("response.created") == 1 and types[-1] == "response.completed"
    assert "response.function_call_arguments.delta" not in types
    added = [e.output_index for e in events if e.type == "response.output_item.added"]
    assert added == list(range(len(added))) == list(range(4))  # message, reasoning, message… numbered across rounds
    numbers = [e.sequence_number for e in events]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert final.id == events[0].response.id
    assert final.output_text == "Let me check. Room 3: 4403."
    assert [item.type for item in final.output] == ["reasoning", "message", "reasoning", "message"]


async def test_a_round_that_calls_a_client_tool_too_goes_to_the_client_without_ours(rig: ResponsesRig) -> None:
    proxy = await paged_proxy(rig)
    calls = [{"name": RECALL, "arguments": RECALL_ARGS}, {"name": "exec_command", "arguments": '{"cmd": "ls"}'}]
    rig.fake.reply(calls=calls, reasoning="both")
    answer = await rig.client(proxy).responses.create(model=MODEL, input=INPUT, tools=TOOLS, store=False)
    assert [(item.type, getattr(item, "name", None)) for item in answer.output] == [
        ("reasoning", None), ("function_call", "exec_command")]  # fmt: skip
    assert len(rig.fake.response_requests()) == 1


async def test_nothing_to_recall_offers_nothing_and_relays_the_upstreams_bytes(rig: ResponsesRig) -> None:
    proxy = await paged_proxy(rig)
    raw = await rig.client(proxy).responses.with_raw_response.create(model=MODEL, input=[user("hi")], tools=TOOLS)
    assert "X-Ctx-Tool-Rounds" not in raw.headers
    assert orjson.loads(rig.fake.response_requests()[0].body)["tools"] == TOOLS


async def test_a_streamed_round_keeps_the_reasoning_that_led_to_a_client_call(rig: ResponsesRig) -> None:
    proxy = await paged_proxy(rig)
    calls = [{"name": RECALL, "arguments": RECALL_ARGS}, {"name": "exec_command", "arguments": '{"cmd": "ls"}'}]
    rig.fake.reply(calls=calls, reasoning="both")
    async with rig.client(proxy).responses.stream(model=MODEL, input=INPUT, tools=TOOLS, store=False) as stream:
        final = await stream.get_final_response()
    assert [(item.type, getattr(item, "name", None)) for item in final.output] == [
        ("reasoning", None), ("function_call", "exec_command")]  # fmt: skip


async def test_a_streamed_reasoning_that_led_to_ours_alone_is_never_shown(rig: ResponsesRig) -> None:
    proxy = await paged_proxy(rig)
    rig.fake.reply(calls=[{"name": RECALL, "arguments": RECALL_ARGS}], reasoning="look")
    rig.fake.reply("Room 3: 4403.")
    async with rig.client(proxy).responses.stream(model=MODEL, input=INPUT, tools=TOOLS, store=False) as stream:
        events = [event async for event in stream]
        final = await stream.get_final_response()
    assert [item.type for item in final.output] == ["message"]
    assert [e.output_index for e in events if e.type == "response.output_item.added"] == [0]
    assert not any(e.type.startswith("response.reasoning") for e in events)


async def test_a_later_round_refused_as_too_long_is_sent_again_with_the_answers_withdrawn(rig: ResponsesRig) -> None:
    proxy = await paged_proxy(rig)
    rig.fake.reply(calls=[{"name": RECALL, "arguments": RECALL_ARGS}])
    rig.fake.reply_error(400, openai_error(TOO_LONG, param="input", code="context_length_exceeded"))
    rig.fake.reply("Without the page, I cannot tell.")
    raw = await rig.client(proxy).responses.with_raw_response.create(model=MODEL, input=INPUT, tools=TOOLS)
    assert raw.parse().output_text == "Without the page, I cannot tell."
    refused, retried = (orjson.loads(r.body) for r in rig.fake.response_requests()[1:])
    assert [i["output"] for i in retried["input"] if i["type"] == "function_call_output"] == [NO_ROOM]
    assert retried["tool_choice"] == "none" and refused["input"][:-1] == retried["input"][:-1]

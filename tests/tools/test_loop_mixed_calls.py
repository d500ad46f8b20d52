"""Client tools and proxy tools in one answer: ours are dropped, the client's reach it as if alone."""

from __future__ import annotations

import aiohttp
import openai

from tests.recall.paged import RECALL
from tests.tools.conftest import LoopProxy, Upstream
from tests.tools.wire import CLIENT_TOOL, USER, chat, recall

LOOKUP = {"function": {"name": "lookup", "arguments": '{"q": "launch"}'}}


async def test_mixed_json(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_json(tool_calls=[recall(1), LOOKUP])
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(tools=[CLIENT_TOOL])) as resp:
        answer = await resp.json()
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert [c["function"] for c in choice["message"]["tool_calls"]] == [LOOKUP["function"]]
    assert loop_proxy.executed == [] and len(upstream.fake.chat_requests()) == 1

    # The client's next request (its own call and result) is a valid conversation for the upstream.
    call = choice["message"]["tool_calls"][0]
    follow_up = [*USER, choice["message"], {"role": "tool", "tool_call_id": call["id"], "content": "4711"}]
    upstream.fake.reply_json("The code is 4711.")
    async with (
        aiohttp.ClientSession() as http,
        http.post(loop_proxy.url(), json=chat(tools=[CLIENT_TOOL], messages=follow_up)) as resp,
    ):
        assert (await resp.json())["choices"][0]["message"]["content"] == "The code is 4711."
    sent = upstream.fake.chat_requests()[1].json()["messages"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == [sent[2]["tool_call_id"]]


async def test_mixed_stream_through_the_sdk(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(tool_calls=[recall(1), LOOKUP, recall(2)])
    client = openai.AsyncOpenAI(base_url=loop_proxy.base_url, api_key="x", max_retries=0)
    stream = await client.chat.completions.create(model="gpt-4o-mini", messages=USER, tools=[CLIENT_TOOL], stream=True)
    calls: dict[int, dict[str, str]] = {}
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                seen = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                seen["id"] += delta.id or ""
                if delta.function:
                    seen["name"] += delta.function.name or ""
                    seen["arguments"] += delta.function.arguments or ""
            finish = choice.finish_reason or finish
    await client.close()
    assert calls == {0: {"id": "call_1_1", "name": "lookup", "arguments": '{"q": "launch"}'}}
    assert finish == "tool_calls"
    assert loop_proxy.executed == [] and len(upstream.fake.chat_requests()) == 1


async def test_a_client_tool_with_our_default_name_stays_the_clients(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    theirs = {"type": "function", "function": {"name": RECALL, "parameters": {"type": "object", "properties": {}}}}
    upstream.fake.reply_json(tool_calls=[{"function": {"name": RECALL, "arguments": "{}"}}])
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(tools=[theirs])) as resp:
        answer = await resp.json()
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == RECALL
    assert loop_proxy.executed == []
    offered = [t["function"]["name"] for t in upstream.fake.chat_requests()[0].json()["tools"]]
    assert offered == [RECALL, RECALL + "_", "ctxproxy_search_memory"]

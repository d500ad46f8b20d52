"""Non-streamed: the model recalls a page, ctxproxy answers, the client gets only the final answer."""

from __future__ import annotations

import aiohttp
import orjson

from tests.recall.paged import RECALL, SEARCH
from tests.tools.conftest import RECALL_ANSWER, LoopProxy, Upstream
from tests.tools.wire import CLIENT_TOOL, USER, chat, recall, usage


async def test_recall_round_trip(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_json(tool_calls=[recall(3, id="call_r1")], usage=usage(100, 12, cached=64))
    upstream.fake.reply_json("The launch code is 4711.", usage=usage(150, 8, cached=96))
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat()) as resp:
        assert resp.status == 200
        assert resp.headers["X-Ctx-Test"] == "loop"
        assert resp.headers["x-request-id"] == "req_2"  # headers of the last upstream answer
        answer = await resp.json()

    message = answer["choices"][0]["message"]
    assert message["content"] == "The launch code is 4711."
    assert "tool_calls" not in message and answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"] == {
        "prompt_tokens": 250,
        "completion_tokens": 20,
        "total_tokens": 270,
        "prompt_tokens_details": {"cached_tokens": 160, "audio_tokens": 0},
    }
    assert [(e.name, e.arguments, e.raw) for e in loop_proxy.executed] == [
        ("recall_page", {"page_index": 3}, '{"page_index":3}')
    ]

    first, second = (r.json() for r in upstream.fake.chat_requests())
    assert [t["function"]["name"] for t in first["tools"]] == [RECALL, SEARCH]
    assert first["messages"] == USER and "tool_choice" not in first
    assert second["tools"] == first["tools"]  # same tools, same position: the prompt prefix stays cacheable
    assert second["messages"] == [
        *USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_r1", "type": "function", "function": {"name": RECALL, "arguments": '{"page_index":3}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_r1", "content": RECALL_ANSWER},
    ]
    assert "tool_choice" not in second


async def test_no_proxy_call_relays_the_upstream_bytes(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_json("Plain answer.", usage=usage(10, 3))
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat()) as resp:
        raw = await resp.read()
    answer = orjson.loads(raw)
    assert answer["choices"][0]["message"]["content"] == "Plain answer."
    assert answer["usage"] == usage(10, 3)
    assert raw.startswith(b'{"id":"chatcmpl-fake1"')  # the fake's own serialisation, not re-encoded
    assert loop_proxy.executed == [] and len(upstream.fake.chat_requests()) == 1


async def test_client_tools_stay_first_and_bad_arguments_reach_the_executor(
    loop_proxy: LoopProxy, upstream: Upstream
) -> None:
    upstream.fake.reply_json(tool_calls=[{"function": {"name": SEARCH, "arguments": '["not", "an", "object"]'}}])
    upstream.fake.reply_json("Nothing found.")
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat(tools=[CLIENT_TOOL])) as resp:
        answer = await resp.json()
    assert answer["choices"][0]["message"]["content"] == "Nothing found."
    assert [(e.name, e.arguments) for e in loop_proxy.executed] == [("search_memory", None)]
    first, second = (r.json() for r in upstream.fake.chat_requests())
    assert [t["function"]["name"] for t in first["tools"]] == ["lookup", RECALL, SEARCH]
    # The fake gave the call an id; the tool message answers that id.
    assert second["messages"][-1]["tool_call_id"] == second["messages"][-2]["tool_calls"][0]["id"] == "call_1_0"


async def test_two_calls_in_one_round_get_two_answers(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    search = {"function": {"name": SEARCH, "arguments": '{"query": "launch code"}'}}
    upstream.fake.reply_json(tool_calls=[recall(1), search])
    upstream.fake.reply_json("Done.")
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat()) as resp:
        assert (await resp.json())["choices"][0]["message"]["content"] == "Done."
    assert [e.name for e in loop_proxy.executed] == ["recall_page", "search_memory"]
    messages = upstream.fake.chat_requests()[1].json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in messages[2:]] == ["call_1_0", "call_1_1"]


async def test_text_before_a_tool_round_is_in_the_answer(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_json("Let me check my notes.", tool_calls=[recall(3)])
    upstream.fake.reply_json(None, tool_calls=[recall(4)])  # a round that says nothing
    upstream.fake.reply_json("The launch code is 4711.")
    async with aiohttp.ClientSession() as http, http.post(loop_proxy.url(), json=chat()) as resp:
        answer = await resp.json()
    # What the stream would have shown: every round's text, a blank line between two rounds' texts.
    assert answer["choices"][0]["message"]["content"] == "Let me check my notes.\n\nThe launch code is 4711."
    second, third = (r.json()["messages"] for r in upstream.fake.chat_requests()[1:])
    assert second[-2]["content"] == "Let me check my notes."  # upstream gets each round's own text back
    assert third[-2]["content"] is None

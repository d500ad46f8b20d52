"""Every call the loop answers has an id no other call of the request has: an upstream that sends
calls without ids, or repeats its ids round after round, still gets a valid conversation back."""

from __future__ import annotations

from collections import Counter
from typing import Any

import aiohttp
import orjson
import pytest

from tests.tools.conftest import Executed, MakeLoopProxy, Upstream
from tests.tools.wire import USER, chat, recall


async def page_answer(call: Executed) -> str:
    assert call.arguments is not None
    return f"the text of page {call.arguments['page_index']}"


def assert_answers_match_their_calls(messages: list[dict[str, Any]]) -> None:
    """Each tool message answers the call (by id) that asked for that page; no id is used twice."""
    calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    ids = [c["id"] for c in calls]
    assert all(ids) and len(set(ids)) == len(ids), ids
    pages = {c["id"]: orjson.loads(c["function"]["arguments"])["page_index"] for c in calls}
    answers = [m for m in messages if m["role"] == "tool"]
    assert Counter(m["tool_call_id"] for m in answers) == Counter(ids)
    for answer in answers:
        assert answer["content"] == f"the text of page {pages[answer['tool_call_id']]}"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_id_less_calls_get_ids_unique_across_rounds(
    make_loop_proxy: MakeLoopProxy, upstream: Upstream, stream: bool
) -> None:
    proxy = await make_loop_proxy(answer=page_answer)
    reply = upstream.fake.reply_stream if stream else upstream.fake.reply_json
    reply(tool_calls=[recall(1), recall(2)], ids=False)
    reply(tool_calls=[recall(3), recall(4)], ids=False)
    reply(["Done."] if stream else "Done.")
    async with aiohttp.ClientSession() as http, http.post(proxy.url(), json=chat(stream=stream)) as resp:
        assert resp.status == 200
        await resp.read()
    third = upstream.fake.chat_requests()[2].json()["messages"]
    assert len([m for m in third if m["role"] == "tool"]) == 4
    assert_answers_match_their_calls(third)


async def test_repeated_upstream_ids_are_made_unique(make_loop_proxy: MakeLoopProxy, upstream: Upstream) -> None:
    """An upstream that numbers its calls from 0 in every round, as some local servers do."""
    proxy = await make_loop_proxy(answer=page_answer)
    upstream.fake.reply_json(tool_calls=[recall(1, id="call_0"), recall(2, id="call_1")])
    upstream.fake.reply_json(tool_calls=[recall(3, id="call_0")])
    upstream.fake.reply_json("Done.")
    async with aiohttp.ClientSession() as http, http.post(proxy.url(), json=chat()) as resp:
        assert resp.status == 200
    second, third = (r.json()["messages"] for r in upstream.fake.chat_requests()[1:])
    assert [c["id"] for c in second[-3]["tool_calls"]] == ["call_0", "call_1"]  # the upstream's own, when unique
    assert_answers_match_their_calls(third)


async def test_ids_in_the_clients_history_are_not_reused(make_loop_proxy: MakeLoopProxy, upstream: Upstream) -> None:
    proxy = await make_loop_proxy(answer=page_answer)
    earlier = [
        {"role": "user", "content": "Look up page 9."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{**recall(9), "id": "ctxproxy_call_0", "type": "function"}],
        },
        {"role": "tool", "tool_call_id": "ctxproxy_call_0", "content": "the text of page 9"},
        *USER,
    ]
    upstream.fake.reply_json(tool_calls=[recall(1)], ids=False)
    upstream.fake.reply_json("Done.")
    async with aiohttp.ClientSession() as http, http.post(proxy.url(), json=chat(messages=earlier)) as resp:
        assert resp.status == 200
    assert_answers_match_their_calls(upstream.fake.chat_requests()[1].json()["messages"])

"""A model that keeps calling our tools gets max_rounds answers, then must answer in text."""

from __future__ import annotations

import aiohttp

from tests.recall.paged import RECALL
from tests.tools.conftest import LoopProxy, MakeLoopProxy, Upstream
from tests.tools.wire import chat, chunks, recall, sse, streamed_text


async def test_json_rounds_are_bounded(make_loop_proxy: MakeLoopProxy, upstream: Upstream) -> None:
    proxy: LoopProxy = await make_loop_proxy(max_rounds=2)
    for page in (1, 2, 3, 4):
        upstream.fake.reply_json(tool_calls=[recall(page)])  # the fake ignores tool_choice and keeps calling
    async with aiohttp.ClientSession() as http, http.post(proxy.url(), json=chat()) as resp:
        answer = await resp.json()
    requests = [r.json() for r in upstream.fake.chat_requests()]
    assert len(requests) == 3 and upstream.fake.pending == 1
    assert ["tool_choice" in r for r in requests] == [False, False, True]
    assert requests[2]["tool_choice"] == "none"
    assert [t["function"]["name"] for t in requests[2]["tools"]][0] == RECALL  # definitions stay for the history
    assert [e.arguments for e in proxy.executed] == [{"page_index": 1}, {"page_index": 2}]
    choice = answer["choices"][0]
    assert "tool_calls" not in choice["message"] and choice["finish_reason"] == "stop"


async def test_a_model_that_obeys_the_final_none_answers(make_loop_proxy: MakeLoopProxy, upstream: Upstream) -> None:
    proxy = await make_loop_proxy(max_rounds=1)
    upstream.fake.reply_json(tool_calls=[recall(1)])
    upstream.fake.reply_json("Answer after one round.")
    async with aiohttp.ClientSession() as http, http.post(proxy.url(), json=chat()) as resp:
        answer = await resp.json()
    assert answer["choices"][0]["message"]["content"] == "Answer after one round."
    assert upstream.fake.chat_requests()[1].json()["tool_choice"] == "none"


async def test_stream_rounds_are_bounded(make_loop_proxy: MakeLoopProxy, upstream: Upstream) -> None:
    proxy = await make_loop_proxy(max_rounds=2)
    for page in (1, 2, 3, 4):
        upstream.fake.reply_stream([f"round {page}. "], tool_calls=[recall(page)])
    async with aiohttp.ClientSession() as http, http.post(proxy.url(), json=chat(stream=True)) as resp:
        payloads = await sse(resp)
    requests = [r.json() for r in upstream.fake.chat_requests()]
    assert len(requests) == 3 and requests[2]["tool_choice"] == "none"
    assert len(proxy.executed) == 2
    assert streamed_text(payloads) == "round 1. round 2. round 3. "
    assert all(b'tool_calls":[' not in p for p in payloads)
    finishes = [c["choices"][0]["finish_reason"] for c in chunks(payloads) if c["choices"][0]["finish_reason"]]
    assert finishes == ["stop"] and payloads[-1] == b"[DONE]"

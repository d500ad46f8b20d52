"""The real openai SDK in front of the tool loop: it sees plain answers, never a proxy call."""

from __future__ import annotations

import openai

from tests.tools.conftest import LoopProxy, Upstream
from tests.tools.wire import CLIENT_TOOL, USER, recall, usage


async def test_sdk_json(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_json(tool_calls=[recall(3)], usage=usage(40, 5))
    upstream.fake.reply_json("It is 4711.", usage=usage(60, 4))
    client = openai.AsyncOpenAI(base_url=loop_proxy.base_url, api_key="x", max_retries=0)
    completion = await client.chat.completions.create(model="gpt-4o-mini", messages=USER, tools=[CLIENT_TOOL])
    await client.close()
    assert completion.choices[0].message.content == "It is 4711."
    assert completion.choices[0].message.tool_calls is None
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens, completion.usage.total_tokens) == (
        100,
        9,
        109,
    )
    assert upstream.fake.chat_requests()[1].json()["messages"][-1]["role"] == "tool"


async def test_sdk_stream(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(tool_calls=[recall(3)])
    upstream.fake.reply_stream(["It ", "is ", "4711."])
    client = openai.AsyncOpenAI(base_url=loop_proxy.base_url, api_key="x", max_retries=0)
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=USER, tools=[CLIENT_TOOL], stream=True, stream_options={"include_usage": True}
    )
    text, tool_deltas, finishes, usages = [], [], [], []
    async for chunk in stream:
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            tool_deltas += choice.delta.tool_calls or []
            if choice.finish_reason:
                finishes.append(choice.finish_reason)
        if chunk.usage:
            usages.append(chunk.usage)
    await client.close()
    assert "".join(text) == "It is 4711."
    assert tool_deltas == [] and finishes == ["stop"]
    assert len(usages) == 1 and usages[0].completion_tokens >= 2  # both rounds billed
    assert len(upstream.fake.chat_requests()) == 2


async def test_sdk_stream_helper_accumulates_one_message(loop_proxy: LoopProxy, upstream: Upstream) -> None:
    upstream.fake.reply_stream(["Checking. "], tool_calls=[recall(1)])
    upstream.fake.reply_stream(["Found it."])
    client = openai.AsyncOpenAI(base_url=loop_proxy.base_url, api_key="x", max_retries=0)
    async with client.chat.completions.stream(model="gpt-4o-mini", messages=USER) as stream:
        final = await stream.get_final_completion()
    await client.close()
    assert final.choices[0].message.content == "Checking. Found it."
    assert not final.choices[0].message.tool_calls

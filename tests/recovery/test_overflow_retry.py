"""A prompt that does not fit is compacted before it is sent; an overflow answer from the
upstream is met by compacting harder and retrying once."""

from __future__ import annotations

import aiohttp
import openai
import pytest

from tests.conftest import MakeProxy, Upstream

OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in "
        "9120 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
TENANT = """
default_context_window = {window}
[upstream]
base_url = "{{upstream}}"
[compaction]
strategy = "{strategy}"
summarizer = "extractive"
summary_max_tokens = 200
"""


def history(turns: int, words: int = 60) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": "You are a helpful planner."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Question {i}: " + "tell me about the lake trip " * (words // 6)})
        messages.append(
            {"role": "assistant", "content": f"Answer {i}: " + "we went to the lake on Sunday " * (words // 6)}
        )
    messages.append({"role": "user", "content": "What did we decide?"})
    return messages


async def post(proxy, body: dict) -> tuple[int, dict, dict]:
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
            return resp.status, dict(resp.headers), await resp.json(content_type=None)


async def test_overflow_answer_is_retried_once_after_compacting(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": TENANT.format(window=100_000, strategy="none")})
    messages = history(30)
    upstream.fake.reply_error(400, OVERFLOW)
    status, headers, answer = await post(proxy, {"model": "m", "messages": messages})
    assert status == 200, answer
    assert headers["X-Ctx-Retried"] == "1"
    sent = upstream.fake.chat_requests()
    assert len(sent) == 2
    first, second = sent[0].json()["messages"], sent[1].json()["messages"]
    assert first == messages  # strategy none: the first attempt went as the client sent it
    assert len(second) < len(first)
    assert second[0] == messages[0] and second[-1] == messages[-1]
    assert second[1]["content"].startswith("## Context Summary")
    assert int(headers["X-Ctx-Tokens-After"]) < int(headers["X-Ctx-Tokens-Before"])
    # The emergency compaction was kept: the next request reuses it and does not overflow again.
    status, headers, _ = await post(
        proxy,
        {
            "model": "m",
            "messages": messages + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "and then?"}],
        },
    )
    assert status == 200
    assert "X-Ctx-Retried" not in headers
    assert int(headers["X-Ctx-Summarized"]) > 1
    assert len(upstream.fake.chat_requests()) == 3


async def test_streamed_overflow_event_before_any_byte_is_retried(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": TENANT.format(window=100_000, strategy="none")})
    upstream.fake.reply_sse_error(OVERFLOW["error"])
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    raw = await client.chat.completions.with_raw_response.create(model="m", messages=history(30), stream=True)
    assert raw.headers["x-ctx-retried"] == "1"
    text = "".join([c.choices[0].delta.content or "" async for c in raw.parse() if c.choices])
    assert text == "echo: What did we decide?"
    assert len(upstream.fake.chat_requests()) == 2
    await client.close()


async def test_a_second_overflow_is_an_openai_shaped_error_saying_what_was_tried(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": TENANT.format(window=100_000, strategy="none")})
    upstream.fake.reply_error(400, OVERFLOW)
    upstream.fake.reply_error(400, OVERFLOW)
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="m", messages=history(30))
    assert caught.value.code == "context_length_exceeded"
    assert "retried once" in caught.value.message
    assert len(upstream.fake.chat_requests()) == 2  # one retry, never a loop
    await client.close()


async def test_body_size_413_is_not_a_token_overflow(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": TENANT.format(window=100_000, strategy="none")})
    too_big = {
        "error": {"message": "Request body too large", "type": "invalid_request_error", "code": "request_too_large"}
    }
    upstream.fake.reply_error(413, too_big)
    status, headers, answer = await post(proxy, {"model": "m", "messages": history(3)})
    assert status == 413 and answer == too_big
    assert "X-Ctx-Retried" not in headers
    assert len(upstream.fake.chat_requests()) == 1


@pytest.mark.parametrize(
    ("strategy", "mode"),
    [
        ("none", "inline"),
        ("sliding_window", "inline"),
        ("rounds", "inline"),
        ("cut_point", "background"),
        ("none", "background"),
    ],
)
async def test_a_prompt_over_the_window_is_compacted_before_it_is_sent(
    make_proxy: MakeProxy, upstream: Upstream, strategy: str, mode: str
) -> None:
    tenant = TENANT.format(window=2048, strategy=strategy) + f'mode = "{mode}"\n'
    proxy = await make_proxy({"default": tenant})
    status, headers, _ = await post(proxy, {"model": "m", "messages": history(30), "max_tokens": 256})
    assert status == 200
    assert int(headers["X-Ctx-Tokens-Before"]) > 2048
    assert int(headers["X-Ctx-Tokens-After"]) <= 2048 - 256
    assert len(upstream.fake.chat_requests()) == 1  # fitted before sending: no overflow round trip

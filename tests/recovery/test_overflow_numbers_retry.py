"""An overflow error that states the upstream's limit and the prompt's size sizes the one retry:
a tenant whose configured window is far too large, against an upstream that takes ~6,000 of its
tokens and counts ~25 % more than ctxproxy, gets its 12k-token conversation answered after
exactly one retry. An error without numbers still shrinks by the old factor.

The retry is the emergency plan over that budget: with ``optimise = "tokens"`` it keeps most of
the upstream's window; with ``"cost"`` (the default) it compacts down to half of it, so the
turns after it append instead of overflowing — and compacting — again."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from ctxproxy.compaction.retry_budget import SHRINK
from tests.conftest import MakeProxy, Upstream
from tests.fakes.upstream import FakeWindow, openai_error

LIMIT = 6_000
TENANT = """
default_context_window = 1000000
[models."m-*"]
context_window = 1000000
[upstream]
base_url = "{upstream}"
[compaction]
summarizer = "extractive"
optimise = "OPTIMISE"
"""


def tenant(optimise: str = "cost") -> str:
    return TENANT.replace("OPTIMISE", optimise)


def retried_share(optimise: str) -> tuple[float, float]:
    """Of the upstream's window, what the retry's prompt takes: at least, at most."""
    return (0.6, 1.0) if optimise == "tokens" else (0.35, 0.6)


WORDS = (
    "lake trip sunday boat rental weather forecast picnic basket sandwiches coffee thermos jacket "
    "hiking trail north shore parking permit ranger station campsite reservation firewood lantern "
    "map compass sunscreen camera battery charger tent stakes sleeping bag breakfast pancakes"
).split()


def openai_wording(limit: int, prompt: int) -> dict[str, Any]:
    return openai_error(
        f"This model's maximum context length is {limit} tokens. However, your messages resulted in {prompt} "
        "tokens. Please reduce the length of the messages.",
        param="messages",
        code="context_length_exceeded",
    )


def anthropic_wording(limit: int, prompt: int) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": f"prompt is too long: {prompt} tokens > {limit} maximum"},
    }


def cerebras_wording(limit: int, prompt: int) -> dict[str, Any]:
    return {
        "message": f"Please reduce the length of the messages or completion. Current length is {prompt} while "
        f"limit is {limit}",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }


def no_numbers(limit: int, prompt: int) -> dict[str, Any]:
    return openai_error("Input is too long for requested model.", code="context_length_exceeded")


def conversation(words: int = 10_800) -> list[dict[str, Any]]:
    """A plain conversation of about 12k tokens (by ctxproxy's count), its words varied."""
    rng = random.Random(11)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful trip planner."}]
    i = 0
    while sum(len(str(m["content"]).split()) for m in messages) < words:
        role = "user" if i % 2 == 0 else "assistant"
        text = " ".join(rng.choice(WORDS) for _ in range(120))
        messages.append({"role": role, "content": f"Turn {i}: {text}."})
        i += 1
    if messages[-1]["role"] == "user":
        messages.append({"role": "assistant", "content": "Noted."})
    messages.append({"role": "user", "content": "What did we decide about the boat?"})
    return messages


async def post(proxy: Any, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
            return resp.status, dict(resp.headers), await resp.json(content_type=None)


def streamed_text(sse: str) -> str:
    events = [line.removeprefix("data: ") for line in sse.splitlines() if line.startswith("data: {")]
    return "".join(
        choice["delta"].get("content") or "" for event in map(json.loads, events) for choice in event["choices"]
    )


async def our_chars_per_token(
    make_proxy: MakeProxy, messages: list[dict[str, Any]], optimise: str = "cost"
) -> tuple[Any, float]:
    """The proxy, and characters per token of ``messages`` by ctxproxy's count (one plain request,
    answered before the upstream gets its small window)."""
    proxy = await make_proxy({"default": tenant(optimise)})
    status, headers, _ = await post(proxy, {"model": "m-small", "messages": messages})
    assert status == 200
    chars = sum(len(m["content"]) for m in messages)
    return proxy, chars / int(headers["X-Ctx-Tokens-Before"])


@pytest.mark.parametrize("optimise", ["cost", "tokens"])
@pytest.mark.parametrize("wording", [openai_wording, anthropic_wording, cerebras_wording])
async def test_a_stated_limit_is_met_by_one_retry(
    make_proxy: MakeProxy, upstream: Upstream, wording: Callable[[int, int], dict[str, Any]], optimise: str
) -> None:
    messages = conversation()
    proxy, chars_per_token = await our_chars_per_token(make_proxy, messages, optimise)
    # The upstream counts 25 % more tokens than ctxproxy does.
    upstream.fake.window = FakeWindow(LIMIT, wording, chars_per_token=chars_per_token / 1.25)
    upstream.fake.requests.clear()

    status, headers, answer = await post(proxy, {"model": "m-small", "messages": messages})

    assert status == 200, answer
    assert 11_000 <= int(headers["X-Ctx-Tokens-Before"]) <= 13_500
    assert headers["X-Ctx-Retried"] == "1"
    assert answer["choices"][0]["message"]["content"] == "echo: What did we decide about the boat?"
    sent = upstream.fake.chat_requests()
    assert len(sent) == 2  # refused once, then fitted: no summary calls with the extractive summariser
    # Not over-cautious: the retry uses most of the upstream's window ("tokens"), or half ("cost").
    least, most = retried_share(optimise)
    assert least * LIMIT <= upstream.fake.window.prompt_tokens(sent[1].json()) <= most * LIMIT


@pytest.mark.parametrize(("optimise", "least", "most"), [("tokens", 0.5, 1.0), ("cost", 0.25, 0.5)])
async def test_an_error_without_numbers_shrinks_by_the_old_factor(
    make_proxy: MakeProxy, upstream: Upstream, optimise: str, least: float, most: float
) -> None:
    """The budget shrinks by SHRINK; the retry keeps most of it ("tokens") or half ("cost")."""
    messages = conversation()
    proxy = await make_proxy({"default": tenant(optimise)})
    upstream.fake.reply_error(400, no_numbers(0, 0))

    status, headers, answer = await post(proxy, {"model": "m-small", "messages": messages})

    assert status == 200, answer
    assert headers["X-Ctx-Retried"] == "1"
    before, after = int(headers["X-Ctx-Tokens-Before"]), int(headers["X-Ctx-Tokens-After"])
    assert least * SHRINK * before <= after <= most * SHRINK * before
    assert len(upstream.fake.chat_requests()) == 2


async def test_a_stated_limit_in_a_stream_error_event_is_met_by_one_retry(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    messages = conversation()
    proxy, chars_per_token = await our_chars_per_token(make_proxy, messages)
    window = FakeWindow(LIMIT, openai_wording, chars_per_token=chars_per_token / 1.25)
    upstream.fake.window = window
    upstream.fake.requests.clear()
    # The refusal comes as the stream's first event, not as an HTTP error.
    upstream.fake.reply_sse_error(openai_wording(LIMIT, window.prompt_tokens({"messages": messages})))

    async with aiohttp.ClientSession() as http:
        body = {"model": "m-small", "messages": messages, "stream": True}
        async with http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
            assert resp.status == 200
            assert resp.headers["X-Ctx-Retried"] == "1"
            text = await resp.text()

    assert streamed_text(text) == "echo: What did we decide about the boat?"
    sent = upstream.fake.chat_requests()
    assert len(sent) == 2
    least, most = retried_share("cost")
    assert LIMIT * least <= window.prompt_tokens(sent[1].json()) <= LIMIT * most

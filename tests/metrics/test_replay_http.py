"""``/metrics`` says what the ``X-Ctx-*`` headers said: a scripted replay of a growing conversation
through the real SDKs (openai's chat completions and Responses API, anthropic's Messages API, google-genai's
Gemini API), JSON and streamed,
whose headers the test sums, then one scrape that must agree."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compaction.test_http_strategies import OPTIONS
from tests.metrics.scrape import scrape
from tests.protocols.conversation import SYSTEM, conversation

PRICE = 2.5  # USD per million prompt tokens
ROUTES = {
    "openai": ("/v1/chat/completions",),
    "anthropic": ("/v1/messages",),
    "responses": ("/v1/responses",),
    # The SDK's default version; a stream is a method of its own on Gemini's API.
    "gemini": ("/v1/models/{model}:generateContent", "/v1/models/{model}:streamGenerateContent"),
}
# After [compaction]: the strategy's options, and a price for every model (a second pattern: the
# first one, the harness's, gives the window only).
EXTRA = OPTIONS["cut_point"] + f'[models."*"]\ninput_price_per_mtok = {PRICE}\n'


async def test_a_replay_counts_what_the_headers_said(protocol: Any) -> None:
    await protocol.start(window=1200, strategy="cut_point", extra=EXTRA)
    turns = conversation(24)
    replies = []
    for end in [*range(3, len(turns) + 1, 4), len(turns)]:  # the last request twice: nothing new to compact
        replies.append(await protocol.send(SYSTEM, turns[:end], stream=end % 8 == 7))
        await protocol.settle()
    before = sum(r.count("Tokens-Before") for r in replies)
    after = sum(r.count("Tokens-After") for r in replies)
    compacted = sum(r.compacted for r in replies)
    cache_prefix = sum(int(r.headers["X-Ctx-Cache-Prefix"].split("/")[1]) for r in replies)
    assert compacted >= 2 and before > after  # the replay did compact: the sums below are not all zero

    metrics = await scrape(str(protocol.proxy.make_url("/metrics")))
    tenant = {"tenant": "default"}
    assert metrics.total("ctxproxy_prompt_tokens_total", stage="before", model=protocol.model, **tenant) == before
    assert metrics.total("ctxproxy_prompt_tokens_total", stage="after", model=protocol.model, **tenant) == after
    assert metrics.total("ctxproxy_compactions_total", strategy="cut_point", mode="inline", **tenant) == compacted
    assert metrics.total("ctxproxy_cache_prefix_tokens_total", model=protocol.model, **tenant) == cache_prefix
    # Money: the prompts priced with the provider's cache as sent and as forwarded (their exact values:
    # tests/protocols/test_cache_prefix.py); what was saved is the difference, whatever its sign.
    priced = {
        stage: metrics.total("ctxproxy_input_usd_total", stage=stage, model=protocol.model, **tenant)
        for stage in ("before", "after")
    }
    assert priced["after"] > 0 and priced["before"] > 0
    assert metrics.total("ctxproxy_saved_usd", model=protocol.model, **tenant) == pytest.approx(
        priced["before"] - priced["after"]
    )
    routes = ROUTES[protocol.name]

    def total(name: str, **labels: str) -> float:
        return sum(metrics.total(name, route=route, **labels) for route in routes)

    assert total("ctxproxy_requests_total", status="200", **tenant) == len(replies)
    assert total("ctxproxy_request_seconds_count", **tenant) == len(replies)
    assert total("ctxproxy_overhead_seconds_count") == len(replies)
    # One upstream call per request (the summaries are extractive: no call of their own).
    assert metrics.total("ctxproxy_upstream_first_byte_seconds_count", **tenant) == len(replies)
    assert metrics.total("ctxproxy_summarizer_seconds_count", summarizer="extractive", **tenant) == compacted
    # Time is split, never invented: ctxproxy's share is part of the whole.
    whole = total("ctxproxy_request_seconds_sum", **tenant)
    assert 0 < total("ctxproxy_overhead_seconds_sum") <= whole
    assert metrics.total("ctxproxy_config_generation") == 1
    assert metrics.label_values("ctxproxy_build_info", "version") == {"0.1.0"}
    assert metrics.total("ctxproxy_overflow_retries_total") == 0

"""``X-Ctx-Cache-Prefix`` and what the prompt cost, over HTTP through both protocols' real SDKs:
a replayed conversation's answers say how much of each forwarded prompt repeats the previous one
(0/0 first, the whole previous prompt while the conversation only appends, less at a compaction);
``/metrics`` counts the same; and ``ctxproxy_saved_usd`` prices prompts with the provider's cache,
so a compaction that rewrites the cached prefix is a cost where counting tokens called it a saving."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compaction.test_http_strategies import MEMORY_OFF
from tests.metrics.scrape import Scrape, scrape
from tests.protocols.clients import Reply
from tests.protocols.conversation import SYSTEM, conversation

PRICE = 2.0  # USD per million prompt tokens
CACHED = PRICE * 0.1  # the default cache discount
PRIMING = 3  # tokens a prompt's count adds for the reply (X-Ctx-Tokens-After), never a message's
PRICED = f'[models."*"]\ninput_price_per_mtok = {PRICE}\n'
# A window where cut_point compacts now and then, and the conversation appends in between.
CUT_POINT = "[compaction.cut_point]\nreserve_tokens = 300\nkeep_recent_tokens = 300\n"
TENANT = {"tenant": "default"}


def prefix(reply: Reply) -> tuple[int, int]:
    messages, tokens = reply.headers["X-Ctx-Cache-Prefix"].split("/")
    return int(messages), int(tokens)


def new_checkpoint(replies: list[Reply], r: int) -> bool:
    """Request ``r`` went with a checkpoint the one before did not: it made it, or the engine did
    after the previous answer."""
    return replies[r].compacted or replies[r].count("Summarized") != replies[r - 1].count("Summarized")


def usd(tokens: int, cached: int) -> float:
    return ((tokens - cached) * PRICE + cached * CACHED) / 1e6


async def saved(protocol: Any) -> float:
    metrics: Scrape = await scrape(str(protocol.proxy.make_url("/metrics")))
    return metrics.total("ctxproxy_saved_usd", model=protocol.model, **TENANT)


async def replay(protocol: Any, *, between: Any = None) -> list[Reply]:
    """A conversation that grows by an answer and a question per request, through ``cut_point``
    with a small window; every answer reports no prompt count (prices come from the cache prefix).
    ``between``: awaited after each request."""
    await protocol.start(window=1600, strategy="cut_point", extra=CUT_POINT + MEMORY_OFF + PRICED)
    turns = conversation(40)
    replies = []
    for end in range(3, len(turns) + 1, 2):
        protocol.reply_reporting(0, None)
        replies.append(await protocol.send(SYSTEM, turns[:end]))
        await protocol.settle()
        if between is not None:
            await between()
    return replies


async def test_the_header_follows_the_prompt_a_replay_forwards(protocol: Any) -> None:
    replies = await replay(protocol)
    assert prefix(replies[0]) == (0, 0)  # nothing was sent before
    compactions = [r for r in range(1, len(replies)) if new_checkpoint(replies, r)]
    assert compactions and compactions[-1] < len(replies) - 2  # and appending after one
    for r in range(1, len(replies)):
        messages, tokens = prefix(replies[r])
        previous = replies[r - 1].count("Tokens-After") - PRIMING  # the whole previous prompt
        if r in compactions:
            assert tokens < previous, r  # the checkpoint rewrote what the provider had seen
        else:
            assert tokens == previous, r  # an appended conversation repeats all of it
            assert messages > prefix(replies[r - 1])[0] or r - 1 in compactions


async def test_metrics_count_the_headers_and_price_the_cache(protocol: Any) -> None:
    replies = await replay(protocol)
    metrics = await scrape(str(protocol.proxy.make_url("/metrics")))
    labels = {"model": protocol.model, **TENANT}
    assert metrics.total("ctxproxy_cache_prefix_tokens_total", **labels) == sum(prefix(r)[1] for r in replies)
    after = sum(usd(r.count("Tokens-After"), prefix(r)[1]) for r in replies)
    assert metrics.total("ctxproxy_input_usd_total", stage="after", **labels) == pytest.approx(after)
    before = metrics.total("ctxproxy_input_usd_total", stage="before", **labels)
    assert metrics.total("ctxproxy_saved_usd", **labels) == pytest.approx(before - after)


async def test_a_compaction_that_breaks_the_cache_is_a_cost(protocol: Any) -> None:
    gauge = [0.0]

    async def note() -> None:
        gauge.append(await saved(protocol))

    replies = await replay(protocol, between=note)
    changes = [b - a for a, b in zip(gauge, gauge[1:], strict=False)]
    for r in range(1, len(replies)):
        # The client appends: without ctxproxy its whole previous prompt would be read from the cache.
        client_cached = replies[r - 1].count("Tokens-Before") - PRIMING
        expected = usd(replies[r].count("Tokens-Before"), client_cached)
        expected -= usd(replies[r].count("Tokens-After"), prefix(replies[r])[1])
        assert changes[r] == pytest.approx(expected), r
    made = [r for r in range(1, len(replies)) if replies[r].compacted]
    assert made
    for r in made:
        # Fewer tokens were sent, which counting tokens alone called a saving; priced, it cost more.
        assert replies[r].count("Tokens-After") < replies[r].count("Tokens-Before")
        assert changes[r] < 0, r


async def test_cached_tokens_the_upstream_reports_are_what_is_priced(protocol: Any) -> None:
    await protocol.start(strategy="none", extra=MEMORY_OFF + PRICED)
    turns = conversation(3)
    protocol.reply_reporting(0, None)
    first = await protocol.send(SYSTEM, turns[:3])
    protocol.reply_reporting(400, 100)  # a quarter of the prompt came from the provider's cache
    second = await protocol.send(SYSTEM, turns[:5])
    assert prefix(second)[1] == first.count("Tokens-After") - PRIMING > 0
    metrics = await scrape(str(protocol.proxy.make_url("/metrics")))
    tokens = second.count("Tokens-After")
    cached = round(tokens / 4)  # the upstream's share, of ctxproxy's count: not the prefix estimate
    expected = usd(first.count("Tokens-After"), 0) + usd(tokens, cached)
    labels = {"model": protocol.model, **TENANT}
    assert metrics.total("ctxproxy_input_usd_total", stage="after", **labels) == pytest.approx(expected)

"""One workload replayed through one tenant (one window) of one strategy's proxy, and what the
upstream received, measured (``_prompt_cost``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from _agent_facts import Asking, FactCounts
from _bench_client import post
from _compaction_servers import Proxy, Upstream
from _prompt_cost import PRIMING, CacheMeter, Unit
from _workloads import Workload

TOOL_LISTS_SLACK = 2


@dataclass
class ReplayStats:
    strategy: str
    tenant: str
    window: int
    workload: str
    limit: int  # window − the answer's reserve (max_tokens)
    meter: CacheMeter = field(default_factory=CacheMeter)
    peak: int = 0
    peak_full: int = 0  # the client's prompt of the request with the peak
    over_window: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    header_mismatch: int = 0
    pairs_plain: int = 0  # consecutive requests, no compaction in between
    hits_plain: int = 0  # ... whose prompts agree up to the previous one's last message
    pairs_compacted: int = 0  # a new checkpoint in between (X-Ctx-Compacted, or X-Ctx-Summarized moved)
    sessions: set[str] = field(default_factory=set)
    kinds: dict[str, int] = field(default_factory=dict)  # the proxy's compaction events, by kind
    split_turns: int = 0  # ... of which summarised a split turn's start apart
    facts: FactCounts = field(default_factory=FactCounts)  # agent workloads: facts of the compacted part kept

    @property
    def compactions(self) -> int:
        return sum(self.kinds.values())

    @property
    def emergency_share(self) -> float | None:
        return self.kinds.get("emergency", 0) / self.compactions if self.compactions else None


async def replay(
    http: aiohttp.ClientSession,
    proxy: Proxy,
    tenant: str,
    window: int,
    upstream: Upstream,
    workload: Workload,
    full: Sequence[Sequence[Unit]],
) -> ReplayStats:
    """``full``: per conversation, the client's units of its whole history (for the peak's client size)."""
    stats = ReplayStats(proxy.strategy, tenant, window, workload.key, window - workload.reserve)
    base = f"{proxy.url}/t/{tenant}"
    shape = workload.shape
    for conv, client_units in zip(workload.conversations, full, strict=True):
        head = len(client_units) - len(conv.messages)
        meter = CacheMeter()
        previous: list[Unit] | None = None
        summarized = 0
        last: tuple[bytes, bytes] | None = None
        for r, n in enumerate(conv.points):
            tag = f"{proxy.strategy}:{tenant}:{workload.key}:{conv.id}:{r}"
            answer = await post(http, base, shape, conv.body(n), tag, conv.headers)
            raw = upstream.bodies.pop(tag, None)
            if not answer.ok or raw is None:
                stats.failed += 1
                if len(stats.errors) < 3:
                    stats.errors.append(answer.error or "the upstream received nothing")
                continue
            stats.sessions.add(answer.session)
            last = (conv.body(n), raw)
            units, _ = shape.units(orjson.loads(raw))
            tokens, _ = meter.add(units)
            if tokens > stats.peak:
                stats.peak = tokens
                stats.peak_full = sum(u.tokens for u in client_units[: head + n]) + PRIMING
            stats.over_window += tokens > stats.limit
            if shape.counts_like_proxy:  # the client's and ctxproxy's tools are one list here, two there: ±2
                stats.header_mismatch += abs(answer.tokens_after - tokens) > TOOL_LISTS_SLACK
            new_checkpoint = answer.compacted or answer.summarized != summarized
            if previous is not None:
                if new_checkpoint:
                    stats.pairs_compacted += 1
                else:
                    k = len(previous) - 1
                    stats.pairs_plain += 1
                    stats.hits_plain += units[:k] == previous[:k]
            previous, summarized = units, answer.summarized
        stats.meter += meter
        if workload.key.startswith("agent") and last is not None:
            missing = stats.facts.add(*last)
            tag = f"{proxy.strategy}:{tenant}:{workload.key}:{conv.id}"
            stats.facts.ask_later(Asking(base, shape, last[0], conv.headers, tag, missing, dict(stats.facts.refs)))
    return stats


def attribute(results: Sequence[ReplayStats], events: Sequence[dict[str, Any]]) -> int:
    """Count a proxy's compaction events into the replay whose session each names; how many
    named none of them."""
    owner = {(s.tenant, session): s for s in results for session in s.sessions}
    lost = 0
    for event in events:
        found = owner.get((event.get("tenant"), event.get("session")))
        if found is None:
            lost += 1
            continue
        kind = str(event.get("kind"))
        found.kinds[kind] = found.kinds.get(kind, 0) + 1
        found.split_turns += event.get("split_turn") is True
    return lost

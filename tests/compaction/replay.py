"""A long session replayed through the engine's pure planning, request by request, with what
each request would cost at a provider that caches byte-identical prefixes.

Two deterministic sessions (``chat_session``: LoCoMo-like small talk, ``agent_session``: a
coding agent whose tool results are most of its tokens) are sent as a stateless client sends
them: the whole history each time, one request after every user message and, in an agent's
tool loop, after every batch of tool results. Each request goes through ``prepare_compaction``
and ``compact_inline`` as ``Compactor.prepare`` strings them, with the real executors (the
extractive summariser through ``execute_plan``; ``paged``'s pure ``archive_pages`` with the
extractive page lines) and the session's checkpoint index kept as the Store keeps it.

``Outcome`` records per request whether it compacted, why, whether the prompt would have fit
without that compaction, what was forwarded and how many of its leading messages repeat the
previous request's forwarded messages byte for byte (what a prompt cache reuses).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ctxproxy.compaction.assemble import assemble, empty_summary_message, summary_message
from ctxproxy.compaction.checkpoints import decode_index, longest_match, with_checkpoint
from ctxproxy.compaction.execute import execute_plan
from ctxproxy.compaction.prepare import Planning, compact_inline, prepare_compaction
from ctxproxy.compaction.runner import as_kept
from ctxproxy.config.models import CompactionConfig
from ctxproxy.session import PrefixChain, message_digest
from ctxproxy.strategies.base import Checkpoint, Conversation, Message, Plan, Window
from ctxproxy.strategies.boundaries import leading_system_count
from ctxproxy.strategies.paged.archive import archive_pages, archived_spans
from ctxproxy.strategies.paged.base import CONTENTS_KIND
from ctxproxy.strategies.registry import builtin_registry
from ctxproxy.summarize import ExtractiveSummarizer
from ctxproxy.summarize.pagelines import extractive_page_lines
from ctxproxy.tokens import TokenCounter
from tests.compaction.gen import CJK_SENTENCES, EN_SENTENCES, PATHS, TOOL_NAMES

COUNTER = TokenCounter()
REGISTRY = builtin_registry()
KINDS = REGISTRY.kinds
CACHE_DISCOUNT = 0.1  # what a provider bills a cached prefix token, relative to an uncached one
SECONDS_PER_REQUEST = 20.0
STRATEGIES = ("none", "sliding_window", "rolling_summary", "rounds", "cut_point", "paged")

# --- sessions ---------------------------------------------------------------------------------


def _sentences(rnd: random.Random, count: int) -> str:
    return " ".join(rnd.choice(EN_SENTENCES + CJK_SENTENCES[:3]) for _ in range(count))


def chat_session(turns: int = 400, seed: int = 3) -> list[Message]:
    """Small talk as in LoCoMo: short user and assistant messages, ~20 to 120 tokens each."""
    rnd = random.Random(seed)
    messages: list[Message] = [{"role": "system", "content": "You are a friendly companion. Remember what I say."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": _sentences(rnd, rnd.randint(1, 6))})
        if turn < turns - 1:
            messages.append({"role": "assistant", "content": _sentences(rnd, rnd.randint(1, 6))})
    return messages


def agent_session(turns: int = 60, seed: int = 5) -> list[Message]:
    """A coding agent: each user task answered by 1–4 tool rounds whose results take ~100 to
    ~6,000 tokens (a file read, a test run), then an answer; ~250,000 tokens in all."""
    rnd = random.Random(seed)
    messages: list[Message] = [
        {"role": "system", "content": "You are a coding agent. Use the tools; be brief."},
        {"role": "developer", "content": "The repository is a Python service; run the tests after each change."},
    ]
    calls = 0
    for turn in range(turns):
        messages.append({"role": "user", "content": _sentences(rnd, rnd.randint(1, 4))})
        if turn == turns - 1:
            break
        for _ in range(rnd.randint(1, 4)):
            ids = []
            for _ in range(rnd.randint(1, 2)):
                calls += 1
                ids.append(f"call_{calls}")
            tool_calls = [
                {
                    "id": i,
                    "type": "function",
                    "function": {
                        "name": rnd.choice(TOOL_NAMES),
                        "arguments": orjson.dumps({"path": rnd.choice(PATHS)}).decode(),
                    },
                }
                for i in ids
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
            for i in ids:
                size = rnd.choice((8, 20, 60, 150, 300, 450))  # sentences: ~100 to ~6,000 tokens
                messages.append({"role": "tool", "tool_call_id": i, "content": _sentences(rnd, size)})
        messages.append({"role": "assistant", "content": _sentences(rnd, rnd.randint(2, 8))})
    return messages


def request_ends(messages: Sequence[Message]) -> list[int]:
    """Where each request of a stateless client ends (exclusive): after every user message, and
    after the last result of every tool round (the agent's next call)."""
    ends = []
    for i, message in enumerate(messages):
        role = message.get("role")
        following = messages[i + 1].get("role") if i + 1 < len(messages) else None
        if role == "user" or (role == "tool" and following != "tool"):
            ends.append(i + 1)
    return ends


# --- the replay -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tenant:
    """What the replay's tenant configures: its strategy, that strategy's table, and the rest
    of ``[compaction]`` (``optimise``, ``summary_max_tokens`` ...)."""

    strategy: str
    options: Mapping[str, Any] = field(default_factory=dict)
    compaction: Mapping[str, Any] = field(default_factory=dict)

    def config(self) -> CompactionConfig:
        options = {self.strategy: REGISTRY.options(self.strategy, self.options)}
        return CompactionConfig(strategy=self.strategy, summarizer="extractive", options=options, **self.compaction)


@dataclass(frozen=True)
class Outcome:
    """One request. ``reasons``: of each plan run (the strategy's, then an emergency top-up);
    ``fits``: the prompt forwarded with the checkpoint it matched fits its window (so a
    compaction was not needed to fit); ``cached``: tokens of the leading forwarded messages that
    the previous request forwarded too, in the same places."""

    reasons: tuple[str, ...]
    fits: bool
    tokens: int
    budget: int
    cached: int

    @property
    def compacted(self) -> bool:
        return bool(self.reasons)

    @property
    def cost(self) -> float:
        return self.tokens - self.cached + CACHE_DISCOUNT * self.cached


@dataclass
class Replay:
    tenant: Tenant
    window: Window
    index: Any = None
    previous: list[bytes] = field(default_factory=list)  # the previous request's forwarded messages, serialised
    outcomes: list[Outcome] = field(default_factory=list)

    def conversation(
        self, messages: Sequence[Message], tokens: Sequence[int], head: int, current: Checkpoint | None
    ) -> Conversation:
        """As ``SessionViews.conversation`` sees the request with ``current``."""
        config = self.tenant.config()
        placement = config.summary_placement
        summary = _tokens(summary_message(current, placement, KINDS)) if current is not None else 0
        overhead = _tokens(empty_summary_message(placement, KINDS))
        budget = config.summary_budget(self.window.budget)
        return Conversation(messages, tokens, head, self.window, summary, overhead, config.optimise, budget)

    async def request(
        self, messages: Sequence[Message], chain: PrefixChain, tokens: Sequence[int], now: float
    ) -> Outcome:
        config = self.tenant.config()
        planning = Planning.of(REGISTRY, config)
        head = leading_system_count(messages)
        matched = longest_match(decode_index(self.index), chain)
        conv = self.conversation(messages, tokens, head, matched)
        prepared = prepare_compaction(conv, matched, planning, now)
        reasons: list[str] = []

        async def run(plan: Plan, current: Checkpoint | None, wait: bool) -> tuple[Checkpoint | None, bool]:
            made = as_kept(
                await self._execute(plan, messages, chain, head, current, config, now), current, len(messages)
            )
            self.index = orjson.loads(orjson.dumps(with_checkpoint(self.index, made)))
            reasons.append(plan.reason)
            return made, True

        current, after = prepared.checkpoint, conv
        if prepared.plan is not None:
            done = await compact_inline(
                prepared.plan, prepared, planning, lambda c: self.conversation(messages, tokens, head, c), run
            )
            current, after = done.checkpoint, done.conv
        forwarded = assemble(messages, head, current, config.summary_placement, KINDS)
        outcome = Outcome(
            tuple(reasons), prepared.fits, after.forwarded_tokens(current), conv.window.budget, self._cached(forwarded)
        )
        self.outcomes.append(outcome)
        return outcome

    async def _execute(
        self,
        plan: Plan,
        messages: Sequence[Message],
        chain: PrefixChain,
        head: int,
        current: Checkpoint | None,
        config: CompactionConfig,
        now: float,
    ) -> Checkpoint:
        if plan.block_kind == CONTENTS_KIND:
            lines = [extractive_page_lines(messages[start:end]) for _, start, end in archived_spans(plan)]
            options = config.options[config.strategy]
            result = archive_pages(plan, messages, chain, head, current, lines, {}, options, COUNTER.count_text, now)  # type: ignore[arg-type]
            return result.checkpoint
        summarizer = ExtractiveSummarizer(COUNTER)
        budget = config.summary_budget(self.window.budget)
        return await execute_plan(plan, messages, chain, head, current, summarizer, budget, now)

    def _cached(self, forwarded: Sequence[Message]) -> int:
        now = [orjson.dumps(m) for m in forwarded]
        cached = 0
        for i, (before, after) in enumerate(zip(self.previous, now, strict=False)):
            if before != after:
                break
            cached += _tokens(forwarded[i])
        self.previous = now
        return cached


def _tokens(message: Message) -> int:
    return COUNTER.count_message(message, message_digest(message))


def replay(messages: Sequence[Message], tenant: Tenant, window: Window) -> list[Outcome]:
    """Every request of ``messages`` (``request_ends``) through ``tenant``'s planning at ``window``."""
    digests = PrefixChain.of(messages).digests
    tokens = COUNTER.count_each(messages, digests)
    session = Replay(tenant, window)

    async def go() -> list[Outcome]:
        for n, end in enumerate(request_ends(messages)):
            chain = PrefixChain(tuple(digests[:end]))
            await session.request(messages[:end], chain, tokens[:end], n * SECONDS_PER_REQUEST)
        return session.outcomes

    return asyncio.run(go())

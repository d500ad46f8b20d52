"""The compaction invariants of DESIGN.md §2–3, as properties, for every built-in strategy.

No HTTP and no Store: each request goes through the engine's own pure steps, as
``Compactor.prepare`` strings them, for a client that resends its whole history each turn. A
``Session`` keeps what the Store would (the session's checkpoint index, through a JSON round
trip, as ``with_checkpoint`` stores it); for each request it computes the prefix chain, the
per-message token counts, the head, the longest matching checkpoint and the ``Conversation``
as the engine sees it (``SessionViews.conversation``), calls ``prepare_compaction`` with the
tenant's ``Planning`` (its strategy, then the emergency plan), runs the plan and the emergency
top-up through ``compact_inline`` with the engine's summary executor (``execute_plan``, with the
extractive summariser) in place of the single-flight run, and assembles what is forwarded.
Options are scaled down so that compaction really happens on ≤ 40 messages.

Checked at every request of every replay (``check_step``):

1. the head (leading system/developer messages) is forwarded first, unchanged;
2. the last message is forwarded unchanged;
3. everything from the checkpoint's end on is forwarded byte-identical;
4. no orphan tool result, no dangling tool call (``breaks_tool_pairs`` agrees);
5. the checkpoint's blocks tile ``[head, end)``, ``end`` is no tool result, covered
   non-system messages are gone, covered system messages are forwarded verbatim after the head,
   and the summary is the messages its kind shows (one, or one per Session Memory block);
6. between two compactions, consecutive requests forward identical prefix bytes
   (``check_replay``), and a compaction that appends a block keeps the summary messages already
   sent;
7. edited and forked histories only reuse checkpoints that end at or before the change, and
   the longest of those (``test_edited_or_forked_history_*``);
8. ``none`` forwards the client's messages as they are whenever they fit, and compacts only
   with the emergency plan, only when they do not.

Plus: the client's messages are never mutated; plans start where the raw history starts and end
before the last message, with one emergency top-up at most; preparing the same request again
after a compaction plans nothing (where the strategy settles); the planner's token estimate is what is really forwarded; every
summary block stays within the summary budget; the invariants survive turns the proxy never saw
and a tenant switching strategy mid-session; and a long conversation does get compacted
(``test_compaction_happens``), so none of this is vacuous.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxproxy.compaction.assemble import (
    Placement,
    assemble,
    breaks_tool_pairs,
    empty_summary_message,
    summary_messages,
)
from ctxproxy.compaction.checkpoints import decode_index, longest_match, with_checkpoint
from ctxproxy.compaction.execute import execute_plan
from ctxproxy.compaction.prepare import Planning, Preparation, compact_inline, prepare_compaction
from ctxproxy.compaction.runner import as_kept
from ctxproxy.config.models import CompactionConfig
from ctxproxy.session import PrefixChain, message_digest
from ctxproxy.strategies.base import SYSTEM_ROLES, Checkpoint, Conversation, Message, Optimise, Plan, Window
from ctxproxy.strategies.boundaries import leading_system_count
from ctxproxy.strategies.kinds import SUMMARY_HEADER
from ctxproxy.strategies.registry import builtin_registry
from ctxproxy.strategies.rounds import SESSION_MEMORY_HEADER
from ctxproxy.summarize import ExtractiveSummarizer
from ctxproxy.tokens import TokenCounter
from tests.compaction import gen
from tests.compaction.gen import conversations, long_conversation, user_turns

SUMMARY_MAX_TOKENS = 200
PLACEMENT: Placement = "assistant_named"
COUNTER = TokenCounter()  # shared: counts are deterministic, its per-digest cache saves time
REGISTRY = builtin_registry()
KINDS = REGISTRY.kinds


@dataclass(frozen=True)
class Variant:
    strategy: str
    options: Mapping[str, Any]
    window: Window
    # Planning the same request again with the checkpoint just made plans nothing. Not so for
    # rounds without catch_up (B rounds per request, by design) nor for a trigger that is always on.
    settles: bool = True
    optimise: Optimise = "cost"  # the tenant's [compaction] optimise


VARIANTS: dict[str, Variant] = {
    "none": Variant("none", {}, Window(100_000)),
    # Prompts that outgrow the window: the emergency plan compacts for ``none``.
    "none-tight": Variant("none", {}, Window(1500, reserve_output=100)),
    "sliding_window": Variant(
        "sliding_window",
        {
            "context_size": 12,
            "tail_keep_size": 5,
            "compression_window_size": 3,
            "compression_hard_limit": 6,
            "compression_cooldown_sec": 2500.0,  # requests come 1000 s apart: fires now and then
        },
        Window(100_000),
    ),
    "sliding_window-no_cooldown": Variant(
        "sliding_window",
        {
            "context_size": 12,
            "tail_keep_size": 5,
            "compression_window_size": 3,
            "compression_hard_limit": 6,
            "compression_cooldown_sec": 0.0,  # any delta > 0 consolidates once a checkpoint exists
        },
        Window(100_000),
    ),
    "rolling_summary": Variant(
        "rolling_summary", {"summary_max_tokens": SUMMARY_MAX_TOKENS, "headroom_min_tokens": 150}, Window(1500)
    ),
    "rolling_summary-eager": Variant(
        # Triggers at 30 % of the budget, aims at 20 % (often less than head + summary): compacts on
        # most requests, down to the last message.
        "rolling_summary",
        {"summary_max_tokens": SUMMARY_MAX_TOKENS, "min_messages_to_keep": 1, "threshold": 0.3, "target_ratio": 0.2},
        Window(1500, reserve_output=100),
        settles=False,
    ),
    "rounds": Variant("rounds", {"full_context_turns": 2, "cached_context_turns": 2}, Window(100_000), settles=False),
    "rounds-catch_up": Variant(
        "rounds", {"full_context_turns": 2, "cached_context_turns": 2, "catch_up": True}, Window(100_000)
    ),
    "cut_point": Variant("cut_point", {"keep_recent_tokens": 300, "reserve_tokens": 200}, Window(2000)),
    "cut_point-tight": Variant(
        "cut_point", {"keep_recent_tokens": 60, "reserve_tokens": 200}, Window(1200, reserve_output=300)
    ),
    # The notes' rules as they are (optimise = "tokens"), and the defaults scaled to a small window.
    "none-tight-tokens": Variant("none", {}, Window(1500, reserve_output=100), optimise="tokens"),
    "sliding_window-tokens": Variant(
        "sliding_window",
        {"context_size": 12, "tail_keep_size": 5, "compression_window_size": 3, "compression_hard_limit": 6},
        Window(100_000),
        optimise="tokens",
    ),
    "rolling_summary-tokens": Variant(
        "rolling_summary", {"summary_max_tokens": SUMMARY_MAX_TOKENS}, Window(1500), optimise="tokens"
    ),
    "rounds-tokens": Variant(
        "rounds",
        {"full_context_turns": 2, "cached_context_turns": 2},
        Window(100_000),
        settles=False,
        optimise="tokens",
    ),
    "cut_point-tokens": Variant(
        "cut_point", {"keep_recent_tokens": 300, "reserve_tokens": 200}, Window(2000), optimise="tokens"
    ),
    "sliding_window-defaults": Variant("sliding_window", {}, Window(1500)),
    "rolling_summary-defaults": Variant("rolling_summary", {}, Window(1500)),
    "rounds-defaults": Variant("rounds", {}, Window(1500)),
    "cut_point-defaults": Variant("cut_point", {}, Window(1500)),
}
COMPACTING = [name for name, v in VARIANTS.items() if v.strategy != "none"]


def planning(variant: Variant) -> Planning:
    """The tenant's planning, as the engine builds it from its ``[compaction]`` table."""
    return Planning.of(REGISTRY, compaction_config(variant))


def compaction_config(variant: Variant) -> CompactionConfig:
    """The tenant's ``[compaction]``."""
    options = {variant.strategy: REGISTRY.options(variant.strategy, variant.options)}
    return CompactionConfig(
        strategy=variant.strategy, summary_max_tokens=SUMMARY_MAX_TOKENS, optimise=variant.optimise, options=options
    )


def tokens_of(message: Message) -> int:
    return COUNTER.count_message(message, message_digest(message))


def dumps(messages: Sequence[Message]) -> bytes:
    return orjson.dumps(list(messages))


# --- a session through the engine's pure steps ------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One request as the engine handles it."""

    now: float
    variant: Variant
    messages: list[Message]
    head: int
    chain: PrefixChain
    tokens: list[int]
    matched: Checkpoint | None  # the longest match before planning
    prepared: Preparation
    runs: list[tuple[Plan, Checkpoint]]  # each plan executed (the strategy's, then a top-up) and what it made
    checkpoint: Checkpoint | None  # the one forwarded with
    forwarded: list[Message]
    conv_before: Conversation  # what the strategy saw
    conv_after: Conversation  # the same request with the forwarded checkpoint's summary

    @property
    def plan(self) -> Plan | None:
        return self.prepared.plan

    @property
    def made(self) -> Checkpoint | None:
        """The checkpoint this request made and forwarded with, if any."""
        return self.runs[-1][1] if self.runs else None

    @property
    def as_sent(self) -> bool:
        """Forwarded as the client sent it because its strategy compacts only to fit and it fits."""
        return planning(self.variant).compacts_only_to_fit and self.checkpoint is None


def conversation(
    variant: Variant, messages: Sequence[Message], tokens: Sequence[int], head: int, current: Checkpoint | None
) -> Conversation:
    """As ``SessionViews.conversation``: the summary's tokens counted as its rendered message,
    what a summary message costs besides its text, what the tenant optimises and its summary
    budget for the window."""
    summary = sum(tokens_of(m) for m in summary_messages(current, PLACEMENT, KINDS)) if current is not None else 0
    overhead = tokens_of(empty_summary_message(PLACEMENT, KINDS))
    config = compaction_config(variant)
    budget = config.summary_budget(variant.window.budget)
    return Conversation(messages, tokens, head, variant.window, summary, overhead, config.optimise, budget)


@dataclass
class Session:
    """A session of one tenant: its stored checkpoint index and what each checkpoint was made for."""

    variant: Variant
    index: Any = None  # the Store value of the session's checkpoint index
    made_for: dict[tuple[int, str], list[Message]] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)

    @property
    def checkpoints(self) -> list[Checkpoint]:
        return decode_index(self.index)

    async def request(self, messages: Sequence[Message], now: float, variant: Variant | None = None) -> Step:
        """One request; ``variant``: the tenant's strategy changed (a config reload) for this one."""
        variant = variant or self.variant
        messages = list(messages)
        sent = dumps(messages)
        chain = PrefixChain.of(messages)
        tokens = COUNTER.count_each(messages, chain.digests)
        head = leading_system_count(messages)
        matched = longest_match(self.checkpoints, chain)
        conv = conversation(variant, messages, tokens, head, matched)
        tenant = planning(variant)
        prepared = prepare_compaction(conv, matched, tenant, now)
        runs: list[tuple[Plan, Checkpoint]] = []

        async def run(plan: Plan, current: Checkpoint | None, wait: bool) -> tuple[Checkpoint | None, bool]:
            # The engine's run, minus the lease: a summary kind's plan, executed, kept and stored.
            assert KINDS[plan.block_kind].executor is None, "a summary kind"
            summarizer = ExtractiveSummarizer(COUNTER)
            budget = compaction_config(variant).summary_budget(variant.window.budget)
            made = await execute_plan(plan, messages, chain, head, current, summarizer, budget, now)
            made = as_kept(made, current, len(messages))
            # As the Store keeps it: a JSON document, newest KEEP checkpoints.
            self.index = orjson.loads(orjson.dumps(with_checkpoint(self.index, made)))
            self.made_for[(made.end, made.prefix_hash)] = messages
            runs.append((plan, made))
            return made, True

        current, after = prepared.checkpoint, conversation(variant, messages, tokens, head, prepared.checkpoint)
        if prepared.plan is not None:
            done = await compact_inline(
                prepared.plan, prepared, tenant, lambda c: conversation(variant, messages, tokens, head, c), run
            )
            current, after = done.checkpoint, done.conv
        forwarded = assemble(messages, head, current, PLACEMENT, KINDS)
        assert dumps(messages) == sent, "planning, summarising or assembling changed the client's messages"
        step = Step(
            now, variant, messages, head, chain, tokens, matched, prepared, runs, current, forwarded, conv, after
        )  # fmt: skip
        self.steps.append(step)
        return step

    async def replay(self, conversation: Sequence[Message], skip: Collection[int] = ()) -> list[Step]:
        """Send ``conversation[: u + 1]`` for every user message ``u``, 1000 s apart.

        ``skip``: turns the proxy never sees (the client talked to the model directly, or the
        proxy was deployed mid-session); the last turn is always sent.
        """
        turns = user_turns(conversation)
        steps = []
        for t, u in enumerate(turns):
            if t in skip and t != len(turns) - 1:
                continue
            steps.append(await self.request(conversation[: u + 1], now=t * 1000.0))
        return steps


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- the invariants -------------------------------------------------------------------------


def tool_pair_problems(messages: Sequence[Message]) -> list[str]:
    """Orphan results (no earlier call with that id) and calls never answered, strictly."""
    problems = []
    open_calls: set[str] = set()
    answered: set[str] = set()
    for i, message in enumerate(messages):
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                open_calls.add(call["id"])
        elif message.get("role") == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id not in open_calls or call_id in answered:
                problems.append(f"orphan tool result {call_id!r} at {i}")
            answered.add(call_id)
    problems += [f"dangling tool call {c!r}" for c in sorted(open_calls - answered)]
    return problems


def check_plans(step: Step, variant: Variant) -> None:
    messages, forwarded, head = step.messages, step.forwarded, step.head
    # 8. none: the client's messages as they are whenever they fit; else the emergency plan only.
    if variant.strategy == "none":
        if step.conv_before.forwarded_tokens(None) <= variant.window.budget:
            assert step.as_sent and step.plan is None and forwarded == messages
        assert all(plan.reason == "emergency" for plan, _ in step.runs), step.runs

    # The plans: each from where the raw history starts to before the last message.
    assert (step.plan is None) == (not step.runs)
    if step.plan is not None:
        assert step.runs[0][0] == step.plan
    base = step.matched
    for plan, made in step.runs:
        start = head if base is None else max(base.end, head)
        assert plan.start == start, (plan, start)
        assert start < plan.end < len(messages), (plan, len(messages))
        assert made.end == plan.end
        base = made

    # One top-up at most: the emergency plan's estimate (a full summary message) is an upper bound.
    assert len(step.runs) <= 2, step.runs
    # Idempotent: the same request, prepared again with the checkpoint just made, plans nothing.
    if step.made is not None and variant.settles:
        assert prepare_compaction(step.conv_after, step.made, planning(variant), step.now).plan is None


def check_step(step: Step, variant: Variant) -> None:
    messages, forwarded, head, checkpoint = step.messages, step.forwarded, step.head, step.checkpoint
    assert messages[-1]["role"] == "user"
    check_plans(step, variant)

    # 1. The head first, unchanged (the very same objects).
    assert len(forwarded) >= head
    assert all(f is m for f, m in zip(forwarded[:head], messages[:head], strict=True))
    assert dumps(forwarded[:head]) == dumps(messages[:head])
    # 2. The last message unchanged.
    assert forwarded[-1] is messages[-1]

    # 4. Tool pairs: the generator never leaves a call pending, so strictly none anywhere.
    assert tool_pair_problems(messages) == []
    assert tool_pair_problems(forwarded) == []
    assert not breaks_tool_pairs(messages, forwarded)

    # The planner's estimate is what is really forwarded (head + summary + kept + priming).
    assert step.conv_after.forwarded_tokens(checkpoint) == sum(tokens_of(m) for m in forwarded) + 3

    if checkpoint is None:
        assert forwarded == messages and all(f is m for f, m in zip(forwarded, messages, strict=True))
    else:
        check_checkpoint(step, checkpoint)


def check_checkpoint(step: Step, checkpoint: Checkpoint) -> None:
    messages, forwarded, head = step.messages, step.forwarded, step.head
    n = len(messages)
    end = checkpoint.end
    assert head < end < n
    # 3. Everything from the cut on is forwarded byte-identical.
    kept = n - end
    assert all(f is m for f, m in zip(forwarded[-kept:], messages[end:], strict=True))
    assert dumps(forwarded[-kept:]) == dumps(messages[end:])
    assert dumps(forwarded).endswith(dumps(messages[end:])[1:])

    # 5. The summary covers exactly the removed range.
    blocks = checkpoint.blocks
    assert blocks, checkpoint
    assert blocks[0].start == head, (blocks, head)
    assert all(a.end == b.start for a, b in zip(blocks, blocks[1:], strict=False)), blocks
    assert all(b.start < b.end for b in blocks), blocks
    assert blocks[-1].end == end, (blocks, end)
    assert messages[end]["role"] != "tool"
    assert checkpoint.prefix_hash == step.chain.prefix_hash(end).hex()
    covered = messages[head:end]
    covered_system = [m for m in covered if m["role"] in SYSTEM_ROLES]
    forwarded_ids = {id(m) for m in forwarded}
    assert not [m for m in covered if m["role"] not in SYSTEM_ROLES and id(m) in forwarded_ids]
    middle = forwarded[head : len(forwarded) - kept]
    summaries = summary_messages(checkpoint, PLACEMENT, KINDS)
    assert len(middle) == len(covered_system) + len(summaries)
    assert all(f is m for f, m in zip(middle, covered_system, strict=False))  # verbatim, in order, after the head
    assert middle[len(covered_system) :] == summaries
    assert all(isinstance(summary["content"], str) for summary in summaries)
    assert summaries[0]["content"].startswith((SUMMARY_HEADER, SESSION_MEMORY_HEADER))
    assert "\n\n".join(m["content"] for m in summaries) == KINDS.render(blocks)
    not_from_client = [m for m in forwarded if id(m) not in {id(x) for x in messages}]
    assert not_from_client == summaries  # the summary messages, nothing else
    # Each block a summary within budget; one that covers conversation says something.
    for block in blocks:
        assert COUNTER.count_text(block.text) <= SUMMARY_MAX_TOKENS, block
        if any(m["role"] not in SYSTEM_ROLES for m in messages[block.start : block.end]):
            assert block.text.strip(), block


def check_replay(steps: Sequence[Step]) -> None:
    """6. Between two compactions consecutive requests forward the same prefix bytes (those
    forwarded as the client sent them, by a strategy that compacts only to fit, aside)."""
    steps = [step for step in steps if not step.as_sent]
    for before, after in zip(steps, steps[1:], strict=False):
        if after.made is None:
            assert after.checkpoint == before.checkpoint
            prefix = after.forwarded[: len(before.forwarded)]
            assert dumps(prefix) == dumps(before.forwarded)
            assert dumps(after.forwarded).startswith(dumps(before.forwarded)[:-1])
        elif before.checkpoint is not None and after.checkpoint is not None:
            # A compaction that appends a block (rounds) keeps the summary messages already sent,
            # when each block was its own message (not after a switch from a strategy whose
            # blocks render as one).
            old, new = before.checkpoint.blocks, after.checkpoint.blocks
            sent = summary_messages(before.checkpoint, PLACEMENT, KINDS)
            now = summary_messages(after.checkpoint, PLACEMENT, KINDS)
            if new[: len(old)] == old and before.checkpoint.end == old[-1].end and len(now) == len(new):
                assert now[: len(sent)] == sent
        # Checkpoints only move forward along an unedited history.
        if before.checkpoint is not None:
            assert after.checkpoint is not None and after.checkpoint.end >= before.checkpoint.end


# --- properties -----------------------------------------------------------------------------

# INVARIANT_EXAMPLES=1000 for a longer bug hunt; the default keeps the file well under a minute.
EXAMPLES = int(os.environ.get("INVARIANT_EXAMPLES", "80"))
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]
# Turns the proxy does not see: none (most examples), or a few (rounds' catch_up needs them).
skipped_turns: st.SearchStrategy[frozenset[int]] = st.one_of(
    st.just(frozenset()), st.frozensets(st.integers(0, 20), max_size=8)
)


@pytest.mark.parametrize("name", list(VARIANTS))
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=HEALTH)
@given(conversation=conversations(), skip=skipped_turns)
# Found by hypothesis (rolling_summary): the emergency top-up left the prompt 6 tokens too large.
@example(conversation=gen.newest_turn_barely_fits(), skip=frozenset())
def test_invariants_hold_at_every_request(name: str, conversation: list[Message], skip: frozenset[int]) -> None:
    variant = VARIANTS[name]
    session = Session(variant)
    steps = run(session.replay(conversation, skip))
    assert steps and steps[-1].messages == conversation
    for step in steps:
        check_step(step, variant)
    check_replay(steps)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=HEALTH)
@given(conversation=conversations(), data=st.data())
def test_invariants_hold_when_the_tenant_switches_strategy_mid_session(
    conversation: list[Message], data: st.DataObject
) -> None:
    """A config reload may change a tenant's strategy; checkpoints made by the old one are reused."""
    session = Session(VARIANTS["none"])
    steps = []
    for t, u in enumerate(user_turns(conversation)):
        variant = VARIANTS[data.draw(st.sampled_from(list(VARIANTS)), label=f"strategy at turn {t}")]
        step = run(session.request(conversation[: u + 1], now=t * 1000.0, variant=variant))
        check_step(step, variant)
        steps.append(step)
    check_replay(steps)  # ``none`` ignores checkpoints while the prompt fits: those steps aside


def edit(message: Message, marker: str) -> Message:
    """The same message with different content (so a different digest)."""
    content = message.get("content")
    if isinstance(content, list):
        new_content: Any = [*content, {"type": "text", "text": marker}]
    elif isinstance(content, str):
        new_content = content + marker
    else:  # None, with tool_calls
        new_content = marker
    return {**message, "content": new_content}


def best_valid(session: Session, messages: Sequence[Message]) -> Checkpoint | None:
    """The oracle: the longest stored checkpoint made for a history that ``messages`` extends."""
    best = None
    for c in session.checkpoints:
        original = session.made_for[(c.end, c.prefix_hash)]
        if c.end < len(messages) and list(messages[: c.end]) == original[: c.end]:
            if best is None or c.end > best.end:
                best = c
    return best


@pytest.mark.parametrize("name", COMPACTING)
@settings(max_examples=max(1, EXAMPLES // 2), deadline=None, suppress_health_check=HEALTH)
@given(conversation=conversations(), data=st.data())
def test_edited_or_forked_history_reuses_only_checkpoints_before_the_change(
    name: str, conversation: list[Message], data: st.DataObject
) -> None:
    variant = VARIANTS[name]
    session = Session(variant)
    steps = run(session.replay(conversation))
    # A later request of the same session changes its history at i.
    messages = steps[data.draw(st.integers(0, len(steps) - 1), label="turn")].messages
    n = len(messages)
    i = data.draw(st.integers(0, n - 1), label="i")
    edited = [*messages[:i], edit(messages[i], " (edited)"), *messages[i + 1 :]]
    fork_at = data.draw(
        st.sampled_from([j for j in range(1, n) if messages[j]["role"] != "tool"] or [n]), label="fork at"
    )
    forked = [*messages[:fork_at], {"role": "user", "content": "Actually, let's do something else."}]

    # An edit changes the prefix hash from the edited message on.
    assert PrefixChain.of(edited).prefix_hash(i + 1) != PrefixChain.of(messages).prefix_hash(i + 1)
    for changed, at in ((edited, i), (forked, fork_at)):
        chain = PrefixChain.of(changed)
        match = longest_match(session.checkpoints, chain)
        if match is not None:
            assert match.end <= at, (match.end, at)
            assert chain.prefix_hash(match.end).hex() == match.prefix_hash
        assert match == best_valid(session, changed)  # and it is the longest one still valid

    # The session goes on from the edited history, then from the fork: the invariants still hold.
    for changed in (edited, forked):
        if changed[-1]["role"] == "user" and not tool_pair_problems(changed):
            step = run(session.request(changed, now=(len(steps) + 1) * 1000.0))
            check_step(step, variant)


# --- not vacuous ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(VARIANTS))
def test_compaction_happens(name: str) -> None:
    variant = VARIANTS[name]
    conversation = long_conversation(seed=7)
    session = Session(variant)
    steps = run(session.replay(conversation))
    for step in steps:
        check_step(step, variant)
    check_replay(steps)
    last = steps[-1]
    full = sum(last.tokens) + 3
    sent = sum(tokens_of(m) for m in last.forwarded) + 3
    made = [s.made for s in steps if s.made is not None]
    if variant.strategy == "none" and full <= variant.window.budget:
        assert made == [] and last.forwarded == last.messages and sent == full
        return
    assert len(made) > 0
    assert last.checkpoint is not None
    assert sent < full, (sent, full)
    assert len(last.forwarded) < len(last.messages)


# --- regressions ------------------------------------------------------------------------------


def _user(text: str) -> Message:
    return {"role": "user", "content": text}


async def test_a_system_only_range_after_a_split_turn_keeps_one_summary_body_in_budget() -> None:
    """``execute_plan`` used to paste the previous checkpoint's blocks (a history block and a cut_point
    turn prefix) verbatim into the new history block when the newly covered range held only system
    messages: two bodies, every heading twice, over budget (fixed in execute.py during this work).
    The plans are given (cut_point makes split turns only where a turn calls tools, issue 27)."""
    long = gen.long_text_of
    conversation = [
        {"role": "system", "content": "You are helpful."},
        _user(long(60, 1)),  # ~700 tokens
        _user(long(60, 2)),  # ~660
        {"role": "system", "content": long(25, 3)},  # ~230, a mid-conversation system message
        _user(long(50, 4)),  # ~520
        {"role": "assistant", "content": long(60, 5)},  # ~720
        _user("Go on."),
    ]
    chain, summarizer = PrefixChain.of(conversation), ExtractiveSummarizer(COUNTER)
    # The first cut at the system message, splitting the turn of message 2 ...
    first_plan = Plan(start=1, end=3, reason="threshold", merge=True, turn_start=2)
    first = await execute_plan(first_plan, conversation, chain, 1, None, summarizer, SUMMARY_MAX_TOKENS, 1.0)
    assert len(first.blocks) == 2
    # ... and the second covers only that system message before splitting message 4's turn.
    second_plan = Plan(start=3, end=5, reason="threshold", merge=True, turn_start=4)
    made = await execute_plan(second_plan, conversation, chain, 1, first, summarizer, SUMMARY_MAX_TOKENS, 2.0)
    history = made.blocks[0]
    assert (history.start, history.end) == (1, 4)
    headings = [line for line in history.text.splitlines() if line.startswith("### ")]
    assert len(headings) == len(set(headings)), headings  # one body, each section once
    assert COUNTER.count_text(history.text) <= SUMMARY_MAX_TOKENS


def test_rolling_summary_defaults_on_a_4k_window_a_compaction_leaves_the_prompt_under_its_triggers() -> None:
    """The headroom trigger (at least 2000 tokens by default) used to fire below the target level a
    compaction aims at in any window under 5000 tokens, so a compaction that reached its target with
    a full-size summary triggered again at once: a compaction on every request (fixed in
    rolling_summary.trigger_reason during this work: the headroom is capped at what a compaction
    to the target frees). With optimise = "tokens", the note's rules; "cost" leaves more room still:
    ``tests/strategies/test_rolling_summary.py``."""
    from ctxproxy.strategies.rolling_summary import RollingSummary, RollingSummaryOptions, trigger_reason
    from tests.strategies.factories import apply_plan, assistant, conversation, system, user

    options = RollingSummaryOptions(target_ratio=0.6, summary_max_tokens=1200)  # the note's values
    messages = [system(), *(user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(20)), user("last")]
    tokens = [10, *[200] * 20, 10]
    strategy = RollingSummary(options)
    plan = strategy.plan(conversation(messages, tokens, window=4096, optimise="tokens"), None, 0.0)
    assert plan is not None and (plan.start, plan.end) == (1, 15), plan  # 4023 tokens: "threshold"; keep 6
    checkpoint = apply_plan(plan, None, 0.0)
    # The summary came back as large as the planner allowed for.
    after = conversation(messages, tokens, window=4096, summary_tokens=1200, optimise="tokens")
    forwarded = after.forwarded_tokens(checkpoint)
    assert forwarded <= 0.6 * after.window.budget, forwarded  # 2423 <= 2457.6: target reached
    assert trigger_reason(after, checkpoint, options) is None  # was "headroom": 4096 - 2423 < 2000
    assert strategy.plan(after, checkpoint, 1.0) is None  # was Plan(start=15, end=16, reason="headroom")

"""``prepare_compaction`` and the inline sequence around it, without a Store: what a request is
forwarded with, what is compacted first, and what an overflow recovery plans; with
``optimise = "cost"``, no compaction right after one while the prompt fits, and the emergency
plan down to the low-water mark.

Conversations are seen as the engine sees them (``seen``): with the tenant's summary budget and
what it optimises. The emergency plan's numbers below are the ``"tokens"`` ones (its keep
fractions); the cost mode's have their own tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ctxproxy.compaction.prepare import Compacted, Planning, compact_inline, prepare_compaction
from ctxproxy.config.models import CompactionConfig
from ctxproxy.strategies.base import Checkpoint, Conversation, Optimise, Plan
from ctxproxy.strategies.paged import PagedStrategy
from ctxproxy.strategies.registry import builtin_registry
from tests.strategies.factories import apply_plan, assistant, checkpoint, conversation, system, user

REGISTRY = builtin_registry()


def config(strategy: str, optimise: Optimise = "tokens", **options: Any) -> CompactionConfig:
    return CompactionConfig(
        strategy=strategy,
        summary_max_tokens=100,
        optimise=optimise,
        options={strategy: REGISTRY.options(strategy, options)},
    )


def seen(
    messages: list[dict[str, Any]], tokens: Any, window: int, optimise: Optimise = "tokens", **kw: Any
) -> Conversation:
    """The conversation as the engine sees it for a tenant of ``config``: its summary budget (100)
    and what it optimises."""
    return conversation(messages, tokens, window, optimise=optimise, summary_budget=100, **kw)


def history(turns: int) -> list[dict[str, Any]]:
    return [system(), *(m for i in range(turns) for m in (user(f"u{i}"), assistant(f"a{i}"))), user("last")]


def test_none_forwards_the_clients_messages_while_they_fit_even_with_a_matching_checkpoint() -> None:
    planning = Planning.of(REGISTRY, config("none"))
    matched = checkpoint(1, 5)
    prepared = prepare_compaction(seen(history(6), 10, 1000), matched, planning, 0.0)
    assert (prepared.checkpoint, prepared.plan, prepared.fits) == (None, None, True)


def test_none_uses_the_checkpoint_when_the_prompt_does_not_fit_and_plans_only_when_that_does_not_either() -> None:
    planning = Planning.of(REGISTRY, config("none"))
    matched = checkpoint(1, 9)  # covers 8 of the 14 messages of 100 tokens
    fits_with_it = seen(history(6), 100, 1000, summary_tokens=50)
    prepared = prepare_compaction(fits_with_it, matched, planning, 0.0)
    assert (prepared.checkpoint, prepared.plan, prepared.fits) == (matched, None, True)
    too_large = seen(history(6), 100, 600, summary_tokens=50)
    prepared = prepare_compaction(too_large, matched, planning, 0.0)
    assert prepared.checkpoint == matched and not prepared.fits
    assert prepared.plan is not None and prepared.plan.reason == "emergency" and prepared.plan.start == 9


async def test_a_compaction_that_leaves_the_prompt_too_large_is_topped_up_by_the_emergency_plan() -> None:
    # cut_point keeps at least 750 of the 14 × 100 tokens: with its summary that does not fit 800.
    planning = Planning.of(REGISTRY, config("cut_point", keep_recent_tokens=750, reserve_tokens=0))
    messages = history(6)
    prepared = prepare_compaction(seen(messages, 100, 800), None, planning, 0.0)
    assert prepared.plan is not None and prepared.plan.reason != "emergency" and not prepared.fits
    runs: list[tuple[Plan, bool]] = []

    async def run(plan: Plan, current: Checkpoint | None, wait: bool) -> tuple[Checkpoint | None, bool]:
        runs.append((plan, wait))
        return apply_plan(plan, current, 0.0), True

    done = await compact_inline(
        prepared.plan, prepared, planning, lambda c: seen(messages, 100, 800, summary_tokens=100), run
    )
    assert [p.reason for p, _ in runs] == [prepared.plan.reason, "emergency"] and all(wait for _, wait in runs)
    assert runs[1][0].start == prepared.plan.end
    assert done.by_us and done.checkpoint is not None and done.checkpoint.end == runs[1][0].end
    assert done.conv.forwarded_tokens(done.checkpoint) <= 800


def test_after_an_overflow_paged_replans_itself_and_the_others_take_the_emergency_plan() -> None:
    paged = Planning.for_overflow(REGISTRY, config("paged"))
    assert isinstance(paged.strategy, PagedStrategy) and not paged.always
    for name in ("none", "rolling_summary", "rounds"):
        other = Planning.for_overflow(REGISTRY, config(name))
        assert other.strategy is None and other.always
        prepared = prepare_compaction(seen(history(6), 10, 100_000), None, other, 0.0)
        assert prepared.plan is not None and prepared.plan.reason == "emergency"


# What a summary message costs besides its text (its header, role and name): 11 tokens as the
# engine counts the ``assistant_named`` placement (``Conversation.summary_overhead``).
SUMMARY_OVERHEAD = 11
Seen = Callable[[Checkpoint | None], Conversation]


def seen_with(messages: list[dict[str, Any]], tokens: list[int], summary_tokens: int) -> Seen:
    """``conversation(checkpoint)`` for ``compact_inline``: every summary message ``summary_tokens`` long."""

    def conv(current: Checkpoint | None) -> Conversation:
        return replace(
            seen(messages, tokens, 1000, summary_tokens=summary_tokens if current else 0),
            summary_overhead=SUMMARY_OVERHEAD,
        )

    return conv


async def compact(planning: Planning, conv: Seen) -> tuple[list[Plan], Compacted]:
    """One request through ``prepare_compaction`` and ``compact_inline``: the plans run, and the result."""
    prepared = prepare_compaction(conv(None), None, planning, 0.0)
    assert prepared.plan is not None
    runs: list[Plan] = []

    async def run(plan: Plan, current: Checkpoint | None, wait: bool) -> tuple[Checkpoint | None, bool]:
        runs.append(plan)
        return apply_plan(plan, current, 0.0), True

    return runs, await compact_inline(prepared.plan, prepared, planning, conv, run)


async def test_the_top_up_counts_the_summary_message_so_the_same_request_compacts_once() -> None:
    """The invariant tests' counterexample in small: the emergency plan used to estimate the
    summary at its text budget (100), so it folded [2, 4) for 993 of 1000 tokens, 1004 were
    forwarded with the 111-token summary message, and the same request prepared again folded [4, 5)."""
    planning = Planning.of(REGISTRY, config("rolling_summary", summary_max_tokens=100))
    messages = [system(), user("u0"), assistant("a0"), user("u1"), assistant("a1"), user("last")]
    tokens = [20, 300, 300, 300, 400, 470]  # the newest turn alone is about half the window
    conv = seen_with(messages, tokens, summary_tokens=100 + SUMMARY_OVERHEAD)  # summaries as long as allowed
    runs, done = await compact(planning, conv)
    # The strategy keeps its last 4 messages; one top-up then folds all but the newest one.
    assert [(p.start, p.end, p.reason) for p in runs] == [(1, 2, "threshold"), (2, 5, "emergency")]
    assert done.checkpoint is not None and done.conv.forwarded_tokens(done.checkpoint) == 604
    assert prepare_compaction(done.conv, done.checkpoint, planning, 0.0).plan is None


async def test_a_summary_longer_than_planned_is_topped_up_until_the_prompt_fits() -> None:
    """A summary longer than its budget (a summariser counting in another encoding, say) leaves the
    prompt too large after a top-up: the request tops up again rather than forward an overflow and
    leave the next identical request to compact again."""
    planning = Planning.of(REGISTRY, config("none"))
    messages = history(3)  # system, 3 × (user, assistant), user
    tokens = [20, *[200] * 6, 100]
    runs, done = await compact(planning, seen_with(messages, tokens, summary_tokens=800))
    assert [(p.start, p.end) for p in runs] == [(1, 5), (5, 6), (6, 7)]  # forwarded after each: 1323, 1123, 923
    assert done.checkpoint is not None and done.conv.forwarded_tokens(done.checkpoint) == 923
    assert prepare_compaction(done.conv, done.checkpoint, planning, 0.0).plan is None


async def test_a_prompt_that_cannot_fit_is_forwarded_with_all_but_the_newest_message_folded_once() -> None:
    """Nothing makes it fit: the last resort folds everything before the newest message, and the
    same request prepared again finds nothing left to fold (it is not summarised again)."""
    planning = Planning.of(REGISTRY, config("none"))
    messages = history(3)
    tokens = [20, *[200] * 6, 990]  # the newest message alone does not fit the window of 1000
    runs, done = await compact(planning, seen_with(messages, tokens, summary_tokens=100 + SUMMARY_OVERHEAD))
    assert [(p.start, p.end) for p in runs] == [(1, 7)]  # the last resort, in one go
    assert done.checkpoint is not None and done.conv.forwarded_tokens(done.checkpoint) > 1000
    assert prepare_compaction(done.conv, done.checkpoint, planning, 0.0).plan is None

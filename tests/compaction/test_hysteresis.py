"""Hysteresis in the planning glue (``ctxproxy.strategies.hysteresis``, ``prepare_compaction``): a
request right after one that compacted does not compact again while it fits; the emergency plan
cuts down to the low-water mark; a checkpoint records the size of the request it was made for."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.compaction.prepare import Planning, prepare_compaction
from ctxproxy.compaction.runner import as_kept
from ctxproxy.config.models import CompactionConfig
from ctxproxy.session.lineage import Lineage
from ctxproxy.strategies.base import Checkpoint, Conversation, Optimise, system_positions
from ctxproxy.strategies.hysteresis import (
    FLOOR_WATER,
    HIGH_WATER,
    LOW_WATER,
    RECENT,
    RUN_REQUESTS,
    just_compacted,
    low_water,
    rests,
)
from ctxproxy.strategies.registry import builtin_registry
from tests.strategies.factories import assistant, assistant_calls, checkpoint, conversation, system, tool, user

REGISTRY = builtin_registry()


def planning(strategy: str, optimise: Optimise, **options: Any) -> Planning:
    config = CompactionConfig(
        strategy=strategy, optimise=optimise, options={strategy: REGISTRY.options(strategy, options)}
    )
    return Planning.of(REGISTRY, config)


def chat(turns: int) -> list[dict[str, Any]]:
    return [system(), *(m for i in range(turns) for m in (user(f"u{i}"), assistant(f"a{i}"))), user("last")]


def made_for(end: int, request_size: int) -> Checkpoint:
    """A checkpoint covering ``[1, end)``, made for a request of ``request_size`` messages."""
    return as_kept(checkpoint(1, end), None, request_size)


def seen(messages: list[dict[str, Any]], window: int, optimise: Optimise, summary_tokens: int = 0) -> Conversation:
    return conversation(messages, 100, window, summary_tokens=summary_tokens, optimise=optimise, summary_budget=100)


@given(st.lists(st.sampled_from(["user", "assistant", "tool", "system"]), max_size=30), st.integers(0, 32))
def test_the_request_after_a_compaction_reads_up_to_the_second_answer_as_it_would_read_all(
    roles: list[str], made: int
) -> None:
    messages = [{"role": role, "content": "x"} for role in roles]
    answers = sum(1 for m in messages[made:] if m["role"] == "assistant")  # every message since: the rule
    assert just_compacted(seen(messages, 100_000, "cost"), made_for(1, made)) == (answers <= 1)


def test_the_request_after_a_compaction_is_told_apart_from_later_ones() -> None:
    messages = chat(10)  # 22 messages
    conv = seen(messages, 100_000, "cost")
    assert just_compacted(conv, made_for(5, 19))  # the request before: its answer and the new question since
    assert just_compacted(conv, made_for(5, 21))  # this very request (sent again)
    assert not just_compacted(conv, made_for(5, 17))  # two requests ago: two answers since
    assert not just_compacted(conv, checkpoint(1, 5))  # made before it was recorded: not known
    assert not just_compacted(conv, None)
    # An agent's tool loop: the answer to the request that compacted was a tool call.
    loop = [*messages, assistant_calls("read_file"), tool("call_read_file", "…")]
    assert just_compacted(seen(loop, 100_000, "cost"), made_for(5, 21))
    assert not rests(seen(loop, 100_000, "tokens"), made_for(5, 21))  # "tokens": no rest


def test_no_compaction_right_after_one_while_the_prompt_fits() -> None:
    """cut_point keeping 300 tokens of 22 × 100 at a 2,500 window with a reserve of 1,000: over
    its trigger, it would compact again. Right after a compaction, with "cost", it does not; two
    requests later it does; with "tokens", it always does."""
    messages = chat(10)  # 2,203 tokens raw; with a 100-token summary of [1, 5): 1,903
    cost = planning("cut_point", "cost", keep_recent_tokens=300, reserve_tokens=1000)
    previous = made_for(5, 19)
    conv = seen(messages, 2500, "cost", summary_tokens=100)
    assert conv.forwarded_tokens(previous) > 1500  # over cut_point's trigger (2,500 − 1,000)
    assert prepare_compaction(conv, previous, cost, 0.0).plan is None
    assert prepare_compaction(conv, made_for(5, 17), cost, 0.0).plan is not None
    tokens = planning("cut_point", "tokens", keep_recent_tokens=300, reserve_tokens=1000)
    tokens_conv = seen(messages, 2500, "tokens", summary_tokens=100)
    assert prepare_compaction(tokens_conv, previous, tokens, 0.0).plan is not None


def test_a_request_that_does_not_fit_compacts_even_right_after_a_compaction() -> None:
    messages = chat(10)
    cost = planning("cut_point", "cost", keep_recent_tokens=300, reserve_tokens=100)
    conv = seen(messages, 1600, "cost", summary_tokens=100)  # 1,903 > 1,600
    prepared = prepare_compaction(conv, made_for(5, 19), cost, 0.0)
    assert not prepared.fits
    assert prepared.plan is not None and prepared.plan.reason == "threshold"  # the strategy's own plan


def test_the_emergency_plan_cuts_down_to_half_the_budget_with_cost() -> None:
    """``none`` at a 1,000-token window with 22 × 100 tokens: with "tokens" the emergency plan keeps
    half the budget raw (500 tokens, then the summary and head on top: 703 with a 100-token
    summary); with "cost" the whole prompt, its summary at its budget, takes at most 500."""
    messages = chat(10)
    for optimise, kept in (("tokens", 5), ("cost", 2)):
        conv = seen(messages, 1000, optimise)  # type: ignore[arg-type]
        plan = prepare_compaction(conv, None, planning("none", optimise), 0.0).plan  # type: ignore[arg-type]
        assert plan is not None and plan.reason == "emergency" and plan.max_tokens == 100
        assert conv.total - plan.end == kept
    cost = seen(messages, 1000, "cost")
    plan = prepare_compaction(cost, None, planning("none", "cost"), 0.0).plan
    assert plan is not None
    assert cost.tokens_with_cut(plan.end, 100) <= 500 < cost.tokens_with_cut(plan.end - 1, 100)


def test_a_checkpoint_keeps_the_size_of_its_request() -> None:
    made = as_kept(checkpoint(1, 5), checkpoint(1, 3), 21)
    assert made.made_for == 21 and made.base == Lineage(3, "x" * 64)
    assert Checkpoint.from_json(made.to_json()) == made
    assert Checkpoint.from_json({**made.to_json(), "made_for": "21"}).made_for is None  # malformed: not known
    assert "made_for" not in checkpoint(1, 5).to_json()  # not recorded, not stored


def test_the_low_water_mark_goes_lower_only_for_turns_too_large_for_twenty_requests_above_it() -> None:
    """Half the budget while twenty requests' growth (twice the newest messages' mean) fits between
    it and the trigger (90 %); lower for larger turns, never under the system messages and a
    quarter of the rest; "tokens": half."""

    def chat(per_message: int, optimise: Optimise = "cost") -> Conversation:
        messages = [system(), *(m for i in range(12) for m in (user(f"u{i}"), assistant(f"a{i}")))]
        return conversation(messages, [10] + [per_message] * 24, window=10_000, optimise=optimise)

    assert low_water(chat(50)) == 5000  # a LoCoMo-sized chat: 20 × 100 < 9000 − 5000
    assert low_water(chat(150)) == 9000 - 20 * 300  # an agent's turns at 32k-like proportions
    assert low_water(chat(300)) == low_water(chat(2000)) == 10 + 9990 // 4  # the floor: system + a quarter
    assert low_water(chat(2000, "tokens")) == 5000


@given(
    st.lists(st.tuples(st.sampled_from(["system", "developer", "user", "assistant", "tool"]), st.integers(0, 900))),
    st.booleans(),
)
def test_the_low_water_mark_counts_the_system_messages_wherever_they_are(
    turns: list[tuple[str, int]], positions_known: bool
) -> None:
    """The floor's system tokens, read by the system messages' positions (kept with the known
    conversation, or found once), are those of a scan of the history, at any place."""
    messages = [{"role": role, "content": "x"} for role, _ in turns]
    tokens = [count for _, count in turns]
    conv = conversation(messages, tokens, window=10_000)
    if positions_known:
        conv = replace(conv, system_at=system_positions(messages))
    system = sum(t for (role, t) in turns if role in ("system", "developer"))
    budget = conv.window.budget
    recent = [t for role, t in turns[-RECENT:] if role not in ("system", "developer")]
    room = HIGH_WATER * budget - RUN_REQUESTS * (2 * sum(recent) / len(recent) if recent else 0.0)
    floor = system + FLOOR_WATER * max(0, budget - system)
    assert low_water(conv) == int(max(min(LOW_WATER * budget, room), min(LOW_WATER * budget, floor)))

"""rolling_summary (note 001): threshold and headroom triggers, the 0.6 target, the minimum of
four kept messages, tool-result boundaries and the rolling (merged, never stacked) summary; the
cost mode's lower target and room between compactions.

The note's examples run with its target (0.6) and summary budget (1200) given explicitly
(``NOTE``; unset, they depend on ``optimise`` and the window) and with ``optimise = "tokens"``,
the note's rules as they are; the cost mode has its own tests (``test_cost_*``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxproxy.strategies.base import SYSTEM_ROLES, Block, Checkpoint, Conversation, Optimise, Plan
from ctxproxy.strategies.boundaries import is_valid_cut
from ctxproxy.strategies.hysteresis import low_water
from ctxproxy.strategies.rolling_summary import STRATEGY, RollingSummary, RollingSummaryOptions
from tests.strategies.factories import (
    apply_plan,
    assistant,
    assistant_calls,
    checkpoint,
    conversation,
    developer,
    system,
    tool,
    user,
)

SYSTEM_TOKENS = 100
NOTE: dict[str, Any] = {"target_ratio": 0.6, "summary_max_tokens": 1200}  # the note's values
DEFAULTS = RollingSummaryOptions(**NOTE)


def strategy(**options: Any) -> RollingSummary:
    """The note's values unless ``options`` say otherwise."""
    return RollingSummary(RollingSummaryOptions(**{**NOTE, **options}))


def chat(
    tokens: list[int], window: int, reserve_output: int = 0, summary_tokens: int = 0, optimise: Optimise = "tokens"
) -> Conversation:
    """A system prompt, then user / assistant messages alternating (user first), one per token count."""
    messages = [system()] + [
        user(f"question {i}") if i % 2 == 0 else assistant(f"answer {i}") for i in range(len(tokens))
    ]
    return conversation(messages, [SYSTEM_TOKENS, *tokens], window, reserve_output, summary_tokens, optimise)


def prompt_after(conv: Conversation, plan: Plan, previous: Checkpoint | None = None) -> int:
    """The forwarded prompt once ``plan`` is executed and its summary uses its whole budget."""
    saved = apply_plan(plan, previous, now=0.0)
    return replace(conv, summary_tokens=DEFAULTS.summary_max_tokens).forwarded_tokens(saved) - 3


def kept(conv: Conversation, plan: Plan) -> int:
    return conv.tokens_between(plan.end, conv.total)


# 8 × 1500 + 3897 + system 100 + priming 3 = 16000 = 0.8 × 20000.
AT_THRESHOLD = [1500] * 8 + [3897]


def test_below_threshold_nothing_happens() -> None:
    conv = chat([1500] * 8 + [3896], window=20000)
    assert conv.forwarded_tokens(None) == 15999
    assert strategy().plan(conv, None, now=0.0) is None


def test_at_threshold_compacts_down_to_the_target() -> None:
    conv = chat(AT_THRESHOLD, window=20000)
    assert conv.forwarded_tokens(None) == 16000
    plan = strategy().plan(conv, None, now=0.0)
    # Target: 0.6 × 20000 − (100 head + 1200 summary) = 10700 for kept messages:
    # 3897 + 4 × 1500 = 9897 fits, one more 1500 would not.
    assert plan == Plan(start=1, end=5, reason="threshold", merge=True, max_tokens=1200)
    assert kept(conv, plan) + SYSTEM_TOKENS + DEFAULTS.summary_max_tokens <= 0.6 * 20000
    assert kept(conv, plan) + 1500 + SYSTEM_TOKENS + DEFAULTS.summary_max_tokens > 0.6 * 20000


def test_headroom_is_a_share_of_the_window_on_large_windows() -> None:
    """200k window, 120k reserved for the answer: budget 80000, threshold at 64000, but the headroom
    rule wants max(10 % × 200000, 2000) = 20000 tokens free, i.e. compacts above 60000."""
    tokens = [6000] * 8 + [13900]  # forwarded 100 + 48000 + 13900 + 3 = 62003
    conv = chat(tokens, window=200_000, reserve_output=120_000)
    assert conv.forwarded_tokens(None) == 62003 < 0.8 * conv.window.budget
    plan = strategy().plan(conv, None, now=0.0)
    assert plan is not None and plan.reason == "headroom"
    assert prompt_after(conv, plan) <= 0.6 * conv.window.budget
    assert strategy(headroom_ratio=0.05).plan(conv, None, now=0.0) is None  # wants only 10000 free
    assert strategy().plan(replace(conv, window=replace(conv.window, reserve_output=0)), None, now=0.0) is None


def test_headroom_minimum_on_small_windows() -> None:
    """8k window: 10 % is 800 tokens, the 2000-token minimum wins and triggers below 0.8."""
    conv = chat([600] * 8 + [1197], window=8000)
    assert conv.forwarded_tokens(None) == 6100 < 0.8 * 8000
    plan = strategy().plan(conv, None, now=0.0)
    assert plan is not None and plan.reason == "headroom"
    assert strategy(headroom_min_tokens=1000).plan(conv, None, now=0.0) is None


def test_keeps_four_messages_even_when_they_exceed_the_target() -> None:
    conv = chat([500] * 5 + [4000] * 4, window=20000)
    plan = strategy().plan(conv, None, now=0.0)
    assert plan is not None
    assert plan.end == conv.total - 4
    assert kept(conv, plan) == 16000 > 0.6 * 20000


def test_min_messages_to_keep_option() -> None:
    conv = chat([500] * 5 + [4000] * 4, window=20000)
    plan = strategy(min_messages_to_keep=2).plan(conv, None, now=0.0)
    assert plan is not None and plan.end == conv.total - 2  # 2 × 4000 fit in 10700, 3 do not


def test_min_keep_boundary_on_a_tool_result_keeps_more() -> None:
    messages = [
        system(),
        user("q1"),
        assistant("a1"),
        user("q2"),
        assistant("a2"),
        user("Check both services."),
        assistant_calls("status_api", "status_db"),  # 6
        tool("call_status_api", "api: up"),  # 7 = total − 4
        tool("call_status_db", "db: up"),
        assistant("Both are up."),
        user("Good."),
    ]
    tokens = [SYSTEM_TOKENS, 500, 500, 500, 500, 500, 3000, 3000, 3000, 3000, 3000]
    conv = conversation(messages, tokens, 20000, optimise="tokens")
    plan = strategy().plan(conv, None, now=0.0)
    assert plan is not None
    assert plan.end == 6  # the call stays with its two results: five messages kept


def test_target_boundary_on_a_tool_result_keeps_less() -> None:
    """The 0.6 target holds when the cut moves forward past a tool result to the next valid cut."""
    messages = [
        system(),
        user("q1"),
        assistant("a1"),
        user("Read the changelog."),
        assistant_calls("read_changelog"),  # 4
        tool("call_read_changelog", "..."),  # 5: the first message that fits the target
        assistant("It says ..."),  # 6
        user("q4"),
        assistant("a4"),
        user("q5"),
        assistant("a5"),
        user("q6"),
    ]
    tokens = [SYSTEM_TOKENS, 2000, 2000, 2000, 1000, 2000, *[1400] * 6]
    conv = conversation(messages, tokens, 20000, optimise="tokens")
    plan = strategy().plan(conv, None, now=0.0)
    assert plan is not None
    assert plan.end == 6  # 4 and 5 covered together
    assert prompt_after(conv, plan) <= 0.6 * 20000


def test_system_messages_inside_the_range_count_against_the_target() -> None:
    """They are forwarded verbatim after the head, so the kept tail must leave room for them."""
    messages = [
        system(),
        user("q0"),
        developer("Mid-conversation instructions ..."),
        *chat(AT_THRESHOLD, 20000).messages[3:],
    ]
    conv = conversation(messages, [SYSTEM_TOKENS, *AT_THRESHOLD], 20000, optimise="tokens")
    assert conv.messages[2]["role"] in SYSTEM_ROLES
    plan = strategy().plan(conv, None, now=0.0)
    assert plan is not None and plan.end == 6  # not 5: 1500 tokens of instructions stay
    assert prompt_after(conv, plan) <= 0.6 * 20000


def test_rolling_second_compaction_starts_at_the_previous_end() -> None:
    first_conv = chat(AT_THRESHOLD, window=20000)
    first = strategy().plan(first_conv, None, now=0.0)
    assert first is not None
    previous = apply_plan(first, None, now=0.0)

    # Four more messages of 1500 under a 1000-token summary: 100 + 1000 + 9897 + 6000 + 3 = 17000.
    conv = chat([*AT_THRESHOLD, 1500, 1500, 1500, 1500], window=20000, summary_tokens=1000)
    plan = strategy().plan(conv, previous, now=1.0)
    assert plan is not None
    assert (plan.start, plan.end, plan.merge, plan.reason) == (5, 9, True, "threshold")
    saved = apply_plan(plan, previous, now=1.0)
    assert [(b.start, b.end) for b in saved.blocks] == [(1, 9)]  # one rolling summary, not two
    assert prompt_after(conv, plan, previous) <= 0.6 * 20000


def test_a_checkpoint_that_fits_needs_no_new_compaction() -> None:
    first = strategy().plan(chat(AT_THRESHOLD, window=20000), None, now=0.0)
    assert first is not None
    previous = apply_plan(first, None, now=0.0)
    conv = chat([*AT_THRESHOLD, 1500, 1500], window=20000, summary_tokens=1000)
    assert conv.forwarded_tokens(None) > 0.8 * 20000  # raw, it would trigger
    assert strategy().plan(conv, previous, now=1.0) is None  # 100 + 1000 + 12897 + 3 = 14000


def test_nothing_new_to_cover_returns_none() -> None:
    conv = chat([500] * 5 + [5000] * 4, window=20000, summary_tokens=1000)
    assert strategy().plan(conv, checkpoint(1, conv.total - 4), now=0.0) is None


def test_reserved_max_tokens_shrink_the_budget() -> None:
    tokens = [1500] * 8 + [3896]
    assert strategy().plan(chat(tokens, window=20000), None, now=0.0) is None
    conv = chat(tokens, window=20000, reserve_output=2000)
    plan = strategy().plan(conv, None, now=0.0)
    assert plan is not None and plan.reason == "threshold"
    # The target is 0.6 of the 18000-token budget: one message fewer is kept than with 20000.
    assert plan.end == 6
    assert prompt_after(conv, plan) <= 0.6 * 18000


def test_options_defaults_and_validation() -> None:
    assert RollingSummaryOptions() == RollingSummaryOptions(
        threshold=0.8,
        headroom_ratio=0.1,
        headroom_min_tokens=2000,
        min_messages_to_keep=4,
        target_ratio=None,  # unset: by optimise (test_unset_target_*)
        summary_max_tokens=None,  # unset: the request's summary budget
    )
    assert RollingSummaryOptions(threshold=1.0, target_ratio=0.9).threshold == 1.0
    with pytest.raises(ValidationError, match="target_ratio"):
        RollingSummaryOptions(threshold=0.6, target_ratio=0.6)
    bad: list[dict[str, Any]] = [
        {"threshold": 0},
        {"threshold": 1.1},
        {"target_ratio": 0},
        {"target_ratio": 0.9},  # above the default threshold
        {"headroom_ratio": -0.1},
        {"headroom_ratio": 1},
        {"headroom_min_tokens": -1},
        {"min_messages_to_keep": 0},
        {"summary_max_tokens": 0},
        {"retained_ratio": 0.6},  # the note's name: unknown keys are rejected
    ]
    for options in bad:
        with pytest.raises(ValidationError):
            RollingSummaryOptions(**options)
    with pytest.raises(ValidationError):
        DEFAULTS.threshold = 0.9  # type: ignore[misc]
    with pytest.raises(TypeError):
        RollingSummary(object())  # type: ignore[arg-type]
    assert STRATEGY is RollingSummary and STRATEGY.name == "rolling_summary"
    assert STRATEGY.options_model is RollingSummaryOptions


# Properties over generated agent sessions -------------------------------------------------------


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int]]:
    messages: list[dict[str, Any]] = [system()]
    for turn in range(draw(st.integers(1, 6))):
        messages.append(user(f"turn {turn}"))
        if draw(st.booleans()):
            messages.append(developer("reminder"))
        for step in range(draw(st.integers(0, 3))):
            names = [f"t{turn}_{step}_{k}" for k in range(draw(st.integers(0, 2)))]
            if names:
                messages.append(assistant_calls(*names))
                messages += [tool(f"call_{n}", "result") for n in names]
            else:
                messages.append(assistant(f"answer {turn}.{step}"))
    messages.append(user("latest"))
    tokens = draw(st.lists(st.integers(0, 300), min_size=len(messages), max_size=len(messages)))
    return messages, tokens


@settings(max_examples=200, deadline=None)
@given(sessions(), st.integers(500, 6000), st.integers(1, 6), st.integers(0, 6), st.sampled_from(["cost", "tokens"]))
def test_plans_keep_their_invariants(
    session: tuple[list[dict[str, Any]], list[int]], window: int, min_keep: int, covered: int, optimise: Optimise
) -> None:
    messages, tokens = session
    options = RollingSummaryOptions(min_messages_to_keep=min_keep, summary_max_tokens=100)
    conv = conversation(messages, tokens, window=window, summary_tokens=80, optimise=optimise)
    valid = [c for c in range(conv.head + 1, conv.total) if is_valid_cut(messages, c)]
    previous = None
    if covered and valid:
        end = valid[min(covered, len(valid)) - 1]
        previous = Checkpoint(end, "x", (Block(conv.head, end, "s"),), 0.0)
    start = conv.head if previous is None else previous.end

    plan = RollingSummary(options).plan(conv, previous, now=0.0)
    if plan is None:
        return
    latest = conv.total - min_keep
    assert plan.start == start < plan.end <= latest
    assert is_valid_cut(messages, plan.end) and plan.merge and plan.reason in {"threshold", "headroom"}

    def prompt(cut: int) -> int:
        saved = Checkpoint(cut, "x", (Block(conv.head, cut, "s"),), 0.0)
        return replace(conv, summary_tokens=100).forwarded_tokens(
            saved
        )  # the reply priming included, as the plan counts it

    ratio = options.target(optimise)  # unset with cost: lowered for large turns (hysteresis.low_water)
    target = low_water(conv, ratio, options.threshold) if optimise == "cost" else ratio * conv.window.budget
    if prompt(plan.end) <= target:  # on target, keeping as much as the target allows
        assert all(prompt(c) > target for c in valid if start < c < plan.end)
    else:  # over target only when no later valid cut respects the minimum kept
        assert not [c for c in valid if plan.end < c <= latest]


def test_plan_holds_the_summariser_to_the_budget_its_cut_assumed() -> None:
    options = RollingSummaryOptions(summary_max_tokens=300)
    messages = [system("s")] + [user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(30)] + [user("now")]
    conv = conversation(messages, tokens=400, window=10_000)
    plan = RollingSummary(options).plan(conv, None, now=0.0)
    assert plan is not None and plan.max_tokens == 300
    unset = RollingSummary(RollingSummaryOptions()).plan(replace(conv, summary_budget=700), None, now=0.0)
    assert unset is not None and unset.max_tokens == 700  # unset: the request's summary budget


# The cost mode ---------------------------------------------------------------------------------


def test_unset_target_is_the_notes_with_tokens_and_lower_with_cost() -> None:
    assert RollingSummaryOptions().target("tokens") == pytest.approx(0.6)
    assert RollingSummaryOptions().target("cost") == pytest.approx(0.5)
    assert RollingSummaryOptions(threshold=0.4).target("cost") == pytest.approx(0.25)  # always below the threshold
    assert RollingSummaryOptions(target_ratio=0.7).target("cost") == 0.7  # as configured


def test_cost_compacts_at_the_threshold_down_to_half_the_budget() -> None:
    conv = chat(AT_THRESHOLD, window=20000, optimise="cost")
    plan = RollingSummary(RollingSummaryOptions()).plan(conv, None, now=0.0)
    assert plan is not None and plan.reason == "threshold"
    # Target 0.5 × 20000 − (100 head + 1200 summary) = 8700: 3897 + 3 × 1500 fits, one more does not.
    assert plan.end == 6
    assert prompt_after(conv, plan) <= 0.5 * 20000 < prompt_after(conv, replace(plan, end=5))


@pytest.mark.parametrize("window", [4096, 8192])
def test_cost_headroom_fires_well_above_the_target_on_small_windows(window: int) -> None:
    """With "tokens" the headroom rule (2000 tokens, capped at what a compaction to the target
    frees) fires right at the 0.6 target on a 4k window: every turn compacts again. With "cost"
    it fires no lower than 0.25 of the budget above the 0.5 target."""
    options = RollingSummaryOptions()
    for optimise, level in (("tokens", 0.6), ("cost", 0.75)):
        conv = chat([100], window=window, optimise=optimise)  # type: ignore[arg-type]
        threshold, headroom = options.trigger(conv)
        assert min(threshold, window - headroom) >= level * window - 1
    assert RollingSummaryOptions().trigger(chat([100], window=4096, optimise="tokens"))[1] == pytest.approx(0.4 * 4096)


def test_cost_waits_while_the_kept_minimum_leaves_no_room_below_the_trigger() -> None:
    """Four kept messages of 4000 tokens leave the prompt at 17,303 after any compaction, above
    the 16,000 trigger: with "tokens" it compacts (and will again next turn); with "cost" it
    waits until the prompt does not fit."""
    tokens = [500] * 5 + [4000] * 4  # 18,603 forwarded
    assert strategy().plan(chat(tokens, window=20000), None, now=0.0) is not None
    assert strategy().plan(chat(tokens, window=20000, optimise="cost"), None, now=0.0) is None
    plan = strategy().plan(chat(tokens, window=18000, optimise="cost"), None, now=0.0)
    assert plan is not None and plan.end == 6  # it does not fit: now it compacts

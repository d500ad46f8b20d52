"""``sliding_window`` (note 000): triggers, the compressed range, valid cuts, the rhythm, options;
the cost mode's larger batches and the ``tokens`` rule.

The note's rules and rhythm run with ``optimise = "tokens"`` (its window of 12 is the default
there); with ``"cost"`` the window unset is the hard limit, 30 (``test_cost_*``)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ctxproxy.strategies.base import Checkpoint, Conversation, Optimise, Plan
from ctxproxy.strategies.boundaries import is_valid_cut
from ctxproxy.strategies.hysteresis import low_water
from ctxproxy.strategies.sliding_window import STRATEGY, SlidingWindow, SlidingWindowOptions
from tests.strategies.factories import (
    apply_plan,
    assistant,
    assistant_calls,
    call_id,
    checkpoint,
    conversation,
    developer,
    system,
    tool,
    user,
)

TAIL = 40  # the note's defaults
WINDOW = 12
NOW = 10_000.0


def chat(
    non_head: int, head: int = 1, optimise: Optimise = "tokens", tokens: int | None = None, window: int = 8192
) -> Conversation:
    """``head`` system messages, then ``non_head`` messages alternating so the last is a user's."""
    messages: list[dict[str, Any]] = [system(f"rules {i}") for i in range(head)]
    for i in range(non_head):
        from_end = non_head - 1 - i
        messages.append(user(f"u{i}") if from_end % 2 == 0 else assistant(f"a{i}"))
    return conversation(messages, tokens, window, optimise=optimise)


def sliding(**options: Any) -> SlidingWindow:
    return SlidingWindow(SlidingWindowOptions(**options))


def plan_checked(strategy: SlidingWindow, conv: Conversation, cp: Checkpoint | None, now: float = NOW) -> Plan | None:
    """``strategy.plan`` plus the contract every plan must meet."""
    plan = strategy.plan(conv, cp, now)
    if plan is not None:
        assert plan.start == (cp.end if cp else conv.head)
        assert plan.start < plan.end <= conv.total - 1
        assert is_valid_cut(conv.messages, plan.end)
        assert plan.merge is True
        assert plan.state == {"last_consolidated": plan.end}
    return plan


def fresh(end: int) -> Checkpoint:
    """A checkpoint just made (cooldown not passed) that covers ``[1, end)``."""
    return checkpoint(1, end, created_at=NOW)


# -- the early stop -------------------------------------------------------------------------------


@pytest.mark.parametrize("non_head", [1, 10, TAIL - 1, TAIL])
def test_no_plan_while_everything_fits_in_the_tail(non_head: int) -> None:
    assert plan_checked(sliding(compression_cooldown_sec=0), chat(non_head), None) is None


def test_no_plan_when_nothing_new_since_the_checkpoint_even_after_the_cooldown() -> None:
    conv = chat(12 + TAIL)  # total 53, compress_end 13
    cp = checkpoint(1, 13, created_at=0.0)
    assert plan_checked(sliding(), conv, cp, now=NOW) is None


# -- each trigger rule, and one message before it -------------------------------------------------


def test_window_rule() -> None:
    strategy = sliding()
    assert plan_checked(strategy, chat(TAIL + WINDOW - 1), None) is None
    plan = plan_checked(strategy, chat(TAIL + WINDOW), None)
    assert plan is not None and plan.reason == "window"
    assert (plan.start, plan.end) == (1, 1 + WINDOW)


def test_window_rule_after_a_checkpoint() -> None:
    strategy = sliding()
    cp = fresh(13)
    assert plan_checked(strategy, chat(12 + TAIL + WINDOW - 1), cp) is None
    plan = plan_checked(strategy, chat(12 + TAIL + WINDOW), cp)
    assert plan is not None and plan.reason == "window"
    assert (plan.start, plan.end) == (13, 25)


def test_hard_limit_rule_with_a_large_window() -> None:
    strategy = sliding(compression_window_size=50, compression_hard_limit=30, context_size=500)
    assert plan_checked(strategy, chat(TAIL + 29), None) is None
    plan = plan_checked(strategy, chat(TAIL + 30), None)
    assert plan is not None and plan.reason == "hard_limit"
    assert (plan.start, plan.end) == (1, 31)


def test_window_is_reported_when_both_window_and_hard_limit_fire() -> None:
    plan = plan_checked(sliding(compression_window_size=5, compression_hard_limit=5), chat(TAIL + 5), None)
    assert plan is not None and plan.reason == "window"


def test_cooldown_rule_with_explicit_now() -> None:
    strategy = sliding()  # cooldown 900 s
    cp = checkpoint(1, 13, created_at=1_000.0)
    conv = chat(12 + TAIL + 5)  # delta 5: below window and hard limit
    assert plan_checked(strategy, conv, cp, now=1_000.0) is None
    assert plan_checked(strategy, conv, cp, now=1_899.9) is None
    plan = plan_checked(strategy, conv, cp, now=1_900.0)
    assert plan is not None and plan.reason == "cooldown"
    assert (plan.start, plan.end) == (13, 18)


def test_cooldown_fires_for_a_single_new_message() -> None:
    cp = checkpoint(1, 13, created_at=0.0)
    plan = plan_checked(sliding(), chat(12 + TAIL + 1), cp, now=900.0)
    assert plan is not None and plan.reason == "cooldown"
    assert (plan.start, plan.end) == (13, 14)


def test_cooldown_does_not_fire_before_the_first_consolidation() -> None:
    # No checkpoint: no ``last_consolidated_at`` to cool down from, however late it is.
    assert plan_checked(sliding(), chat(TAIL + 5), None, now=1e12) is None


def test_zero_cooldown_consolidates_every_new_message() -> None:
    cp = checkpoint(1, 13, created_at=NOW)
    plan = plan_checked(sliding(compression_cooldown_sec=0), chat(12 + TAIL + 1), cp, now=NOW)
    assert plan is not None and plan.reason == "cooldown"


def test_context_size_safety_net() -> None:
    strategy = sliding(context_size=50, compression_window_size=100, compression_hard_limit=100)
    assert plan_checked(strategy, chat(50), None) is None  # 50 raw messages: at the cap, not over
    plan = plan_checked(strategy, chat(51), None)
    assert plan is not None and plan.reason == "context_size"
    assert (plan.start, plan.end) == (1, 52 - TAIL)


def test_context_size_counts_only_messages_after_the_checkpoint() -> None:
    strategy = sliding(context_size=50, compression_window_size=100, compression_hard_limit=100)
    cp = fresh(21)  # 20 messages summarised
    assert plan_checked(strategy, chat(20 + 50), cp) is None
    plan = plan_checked(strategy, chat(20 + 51), cp)
    assert plan is not None and plan.reason == "context_size"
    assert (plan.start, plan.end) == (21, 72 - TAIL)


# -- the compressed range -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("non_head", "cp_end"),
    [(TAIL + WINDOW, None), (TAIL + 20, None), (TAIL + 100, None), (12 + TAIL + 12, 13), (30 + TAIL + 17, 31)],
)
def test_range_is_exactly_last_consolidated_to_total_minus_tail(non_head: int, cp_end: int | None) -> None:
    conv = chat(non_head)
    cp = fresh(cp_end) if cp_end is not None else None
    plan = plan_checked(sliding(), conv, cp)
    assert plan is not None
    assert (plan.start, plan.end) == (cp_end or conv.head, conv.total - TAIL)


def test_head_messages_are_not_counted() -> None:
    # A system and a developer message: first trigger at total - 40 - 2 == 12.
    strategy = sliding()
    assert plan_checked(strategy, chat(TAIL + WINDOW - 1, head=2), None) is None
    conv = chat(TAIL + WINDOW, head=2)
    plan = plan_checked(strategy, conv, None)
    assert plan is not None and (plan.start, plan.end) == (2, 14)


def test_head_of_system_and_developer_messages() -> None:
    messages = [system("s"), developer("d")] + list(chat(TAIL + WINDOW, head=0).messages)
    plan = plan_checked(sliding(), conversation(messages, optimise="tokens"), None)
    assert plan is not None and plan.start == 2


# -- valid cuts -----------------------------------------------------------------------------------

SMALL = {"context_size": 10, "compression_window_size": 3, "tail_keep_size": 3, "compression_hard_limit": 5}


def test_end_moves_back_off_tool_results_to_the_calling_assistant() -> None:
    messages = [
        system(),
        user("u1"),
        assistant("a1"),
        user("u2"),
        assistant_calls("search", "fetch"),  # 4
        tool(call_id("search"), "r1"),  # 5
        tool(call_id("fetch"), "r2"),  # 6 = total - 3: not a valid cut
        assistant("a2"),
        user("u3"),
    ]
    conv = conversation(messages, optimise="tokens")
    plan = plan_checked(sliding(**SMALL), conv, None)
    assert plan is not None and plan.reason == "window"
    assert (plan.start, plan.end) == (1, 4)  # the call and both results stay raw together


def test_end_on_the_calling_assistant_is_kept() -> None:
    messages = [system(), user("u1"), assistant("a1"), user("u2"), assistant_calls("search")]
    messages += [tool(call_id("search"), "r"), assistant("a2"), user("u3")]
    conv = conversation(messages, optimise="tokens")  # total 8, compress_end 5 (a tool result) -> 4
    plan = plan_checked(sliding(**SMALL), conv, None)
    assert plan is not None and plan.end == 4
    plan = plan_checked(sliding(**{**SMALL, "tail_keep_size": 4}), conv, None)  # compress_end 4
    assert plan is not None and plan.end == 4


def test_no_plan_when_only_tool_results_lie_between_checkpoint_and_compress_end() -> None:
    messages = [system(), user("u1"), assistant("a1"), user("u2"), assistant_calls("a", "b", "c", "d")]
    messages += [tool(call_id(n), n) for n in "abcd"]  # 5..8
    messages += [assistant("done"), user("u3")]  # total 11, compress_end 8
    conv = conversation(messages, optimise="tokens")
    assert plan_checked(sliding(**SMALL), conv, fresh(4)) is None
    # Without the checkpoint, the cut moves back to the call at 4.
    plan = plan_checked(sliding(**SMALL), conv, None)
    assert plan is not None and plan.end == 4


# -- the note's rhythm ----------------------------------------------------------------------------


def test_rhythm_first_trigger_at_twelve_then_every_twelve() -> None:
    """Note 000, diagram 2: with the defaults, messages arrive one at a time; delta counts 1..12,
    a consolidation covers those 12 and delta starts again from 0."""
    strategy = sliding()
    cp: Checkpoint | None = None
    triggers: list[tuple[int, int, int]] = []
    deltas: list[int] = []
    for non_head in range(1, TAIL + 4 * WINDOW + 6):
        conv = chat(non_head)
        last = cp.end if cp else conv.head
        deltas.append(max(0, conv.total - TAIL - last))
        plan = plan_checked(strategy, conv, cp, now=NOW)  # same clock: cooldown never passes
        if plan is not None:
            triggers.append((conv.total, plan.start, plan.end))
            assert plan.reason == "window"
            cp = apply_plan(plan, cp, NOW)
        assert conv.total - (cp.end if cp else conv.head) <= 75  # context_size holds throughout
    assert triggers == [(53, 1, 13), (65, 13, 25), (77, 25, 37), (89, 37, 49)]
    assert deltas[TAIL : TAIL + 13] == list(range(1, 13)) + [1]  # 1..12, trigger, then 1 again
    assert cp is not None and [(b.start, b.end) for b in cp.blocks] == [(1, 49)]  # one rolling block


def test_plan_is_pure_and_replannable() -> None:
    strategy, conv, cp = sliding(), chat(12 + TAIL + WINDOW), fresh(13)
    before = [dict(m) for m in conv.messages]
    assert plan_checked(strategy, conv, cp) == plan_checked(strategy, conv, cp)
    assert [dict(m) for m in conv.messages] == before


# -- options --------------------------------------------------------------------------------------


def test_defaults_are_the_notes() -> None:
    options = SlidingWindowOptions()
    assert options.model_dump() == {
        "context_size": 75,
        "compression_window_size": None,  # unset: the note's 12 with "tokens", the hard limit with "cost"
        "tail_keep_size": 40,
        "compression_cooldown_sec": 900.0,
        "compression_hard_limit": 30,
    }
    assert (options.window("tokens"), options.window("cost")) == (12, 30)
    assert SlidingWindowOptions(compression_window_size=12).window("cost") == 12  # as configured
    assert STRATEGY is SlidingWindow and STRATEGY.name == "sliding_window"
    assert STRATEGY.options_model is SlidingWindowOptions


@pytest.mark.parametrize(("tail", "context"), [(75, 75), (80, 75), (10, 5)])
def test_tail_must_be_below_context_size(tail: int, context: int) -> None:
    with pytest.raises(ValidationError) as info:
        SlidingWindowOptions(tail_keep_size=tail, context_size=context)
    message = str(info.value)
    assert "tail_keep_size" in message and "context_size" in message


@pytest.mark.parametrize(
    "raw",
    [
        {"context_size": 0},
        {"compression_window_size": 0},
        {"tail_keep_size": -1},
        {"compression_hard_limit": 0},
        {"compression_cooldown_sec": -1},
        {"compression_window_size": "many"},
        {"window": 12},  # unknown key
    ],
)
def test_invalid_options_are_rejected(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        SlidingWindowOptions.model_validate(raw)
    assert next(iter(raw)) in str(info.value)


def test_zero_cooldown_is_allowed_and_options_are_frozen() -> None:
    options = SlidingWindowOptions(compression_cooldown_sec=0)
    with pytest.raises(ValidationError):
        options.context_size = 10  # type: ignore[misc]


def test_strategy_needs_its_own_options() -> None:
    from ctxproxy.strategies.none import NoneOptions

    with pytest.raises(TypeError):
        SlidingWindow(NoneOptions())


# -- the cost mode, and the tokens rule ----------------------------------------------------------


def test_cost_consolidates_thirty_messages_at_a_time() -> None:
    strategy = sliding()
    assert plan_checked(strategy, chat(TAIL + 29, optimise="cost"), None) is None
    plan = plan_checked(strategy, chat(TAIL + 30, optimise="cost"), None)
    assert plan is not None and plan.reason == "window"
    assert (plan.start, plan.end) == (1, 31)


@pytest.mark.parametrize("optimise", ["cost", "tokens"])
def test_the_tokens_rule_consolidates_down_to_the_low_water_mark(optimise: Optimise) -> None:
    """Thirty messages of 250 tokens (7,753 with the system message) reach 90 % of an 8k window
    long before forty gather: the consolidation goes on until the prompt, with a summary at the
    request's budget (1,200 here), takes at most the low-water mark (``hysteresis.low_water``)."""
    conv = chat(30, optimise=optimise, tokens=250)
    assert conv.forwarded_tokens(None) == 7753 >= 0.9 * 8192
    plan = plan_checked(sliding(), conv, None)
    assert plan is not None and plan.reason == "tokens"
    # Tokens: 250 + 1200 + 3 + 11 × 250 = 4203 > 4096 ≥ 250 + 1200 + 3 + 10 × 250. Cost: the system
    # message and a quarter of the rest,
    # as 20 requests of 2 × 250 tokens would not fit between half the budget and the trigger.
    low = low_water(conv)
    assert low == (4096 if optimise == "tokens" else 250 + (8192 - 250) // 4)
    assert conv.total - plan.end == (10 if optimise == "tokens" else 3)
    assert conv.tokens_with_cut(plan.end, 1200) <= low < conv.tokens_with_cut(plan.end - 1, 1200)


def test_the_tokens_rule_waits_with_cost_when_the_newest_messages_leave_no_room() -> None:
    messages = [system(), user("u0"), assistant("a0"), user("u1")]
    tokens = [10, 200, 200, 7000]  # 7413: at the high-water mark, and the last message alone is 85 %
    cost = conversation(messages, tokens, 8192, optimise="cost")
    assert plan_checked(sliding(), cost, None) is None
    plan = plan_checked(sliding(), conversation(messages, tokens, 8192, optimise="tokens"), None)
    assert plan is not None and plan.reason == "tokens" and plan.end == 3

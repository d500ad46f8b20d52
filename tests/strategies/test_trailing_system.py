"""A conversation may end in a system message (Claude Code's first request is ``[user, system]``,
the agent list after the prompt): no cut keeps system messages alone, so the user's newest
words are never summarised away, however small the window."""

from __future__ import annotations

from ctxproxy.strategies.boundaries import is_valid_cut, valid_cut_at_or_before
from ctxproxy.strategies.emergency import emergency_plan
from ctxproxy.strategies.registry import builtin_registry
from tests.strategies.factories import assistant, conversation, system, user

KINDS = builtin_registry().kinds


def test_a_cut_never_keeps_only_system_messages() -> None:
    messages = [system(), user("count the ERROR lines"), system("agents: general")]
    assert not is_valid_cut(messages, 2)
    assert valid_cut_at_or_before(messages, 2, 0) == 1  # before the prompt: it and the agent list kept
    later = [*messages, assistant("42"), user("thanks")]
    assert is_valid_cut(later, 2)  # a system message with a turn after it may open the kept part


def test_the_emergency_plan_keeps_the_prompt_of_a_first_request_ending_in_a_system_message() -> None:
    messages = [system(), user("count the ERROR lines in log A"), system("agents: general, Explore")]
    conv = conversation(messages, [20_000, 3_000, 6_000], window=8_192)
    assert emergency_plan(conv, None, 500, KINDS) is None  # nothing before the prompt to summarise


def test_the_emergency_plan_keeps_the_newest_turn_before_a_trailing_system_message() -> None:
    messages = [system(), user("old " * 50), assistant("done"), user("count the ERROR lines"), system("agents")]
    conv = conversation(messages, [100, 5_000, 5_000, 100, 100], window=4_096)
    plan = emergency_plan(conv, None, 200, KINDS)
    assert plan is not None and plan.end <= 3  # the newest user message is kept raw

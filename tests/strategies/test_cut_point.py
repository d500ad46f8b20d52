"""cut_point (note 003): trigger at window − reserve, keep the newest keep_recent_tokens, split turns,
iterative summaries and files carried across compactions; the defaults scaled to the window and
the cost mode's room between compactions.

The note's examples run with the note's numbers given explicitly (``NOTE``: unset, reserve and
keep scale with the budget) and with ``optimise = "tokens"``, the note's rules as they are: at
the note's 40,960-token window its keep of 20,000 leaves so little room below the trigger that
with ``"cost"`` the plan waits until the prompt does not fit (``test_cost_*``)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxproxy.strategies.base import Block, Checkpoint, Conversation, Message, Optimise, Plan
from ctxproxy.strategies.boundaries import is_valid_cut
from ctxproxy.strategies.cut_point import STRATEGY, CutPoint, CutPointOptions
from ctxproxy.strategies.hysteresis import summary_budget
from tests.strategies.factories import (
    apply_plan,
    assistant,
    assistant_calls,
    checkpoint,
    conversation,
    system,
    tool,
    user,
)

# The note's findCutPoint diagram: msg1..msg8 after a system head.
NOTE_TOKENS = [500, 800, 1200, 3000, 5000, 8000, 4000, 2000]
SYSTEM_TOKENS = 100
NOTE_FORWARDED = SYSTEM_TOKENS + sum(NOTE_TOKENS) + 3  # 24603: head + messages + priming
NOTE_WINDOW = 40960  # budget − reserve = 40960 − 16384 = 24576 < 24603: compaction is due
NOTE = {"reserve_tokens": 16384, "keep_recent_tokens": 20000}  # the note's values


def strategy(**options: Any) -> CutPoint:
    """The note's values unless ``options`` say otherwise."""
    return CutPoint(CutPointOptions(**{**NOTE, **options}))


def file_call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def assistant_with(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def note_conversation(
    msgs: list[dict[str, Any]], window: int = NOTE_WINDOW, reserve_output: int = 0, optimise: Optimise = "tokens"
) -> Conversation:
    assert len(msgs) == 8
    return conversation([system(), *msgs], [SYSTEM_TOKENS, *NOTE_TOKENS], window, reserve_output, optimise=optimise)


def note_messages() -> list[dict[str, Any]]:
    """msg1..msg8 (indices 1..8); msg4 is a user message, so cutting there splits no turn."""
    return [
        user("What port does the service listen on?"),
        assistant_with(file_call("call_cfg", "read_file", path="config.toml")),
        tool("call_cfg", "[server]\nport = 8080\n..."),
        user("Change it to 9090 and explain the reload path."),
        assistant("Here is how the reload path works ..."),
        user("Paste the full log of the last deploy: ..."),
        assistant("The log shows ..."),
        user("So what should I do next?"),
    ]


def kept_tokens(conv: Conversation, plan: Plan) -> int:
    return conv.tokens_between(plan.end, conv.total)


def test_note_example_keeps_msg4_to_msg8() -> None:
    """The note's example: from msg8 back, 2000+4000+8000 = 14000, +5000 = 19000, +3000 = 22000 ≥ 20000
    at msg4, so msg4 is the first kept message and msg1–msg3 are summarised.

    The note's prose says "在 msg5 处切" (cut at msg5) while its diagram marks msg4 as the cut and
    msg1–3 as summarised. Cutting at msg5 would keep only 19000 < keep_recent_tokens; we follow the
    rule (keep at least keep_recent_tokens), which is what the diagram shows.
    """
    conv = note_conversation(note_messages())
    plan = strategy().plan(conv, None, now=0.0)
    assert plan == Plan(
        start=1,
        end=4,
        reason="threshold",
        merge=True,
        turn_start=None,
        state={"files_read": ["config.toml"], "files_modified": []},
    )
    assert kept_tokens(conv, plan) == 22000
    assert conv.tokens_between(5, conv.total) == 19000 < NOTE["keep_recent_tokens"]


def test_cut_inside_a_turn_without_tool_calls_moves_back_to_its_user_message() -> None:
    """msg4 is an assistant message in the turn opened by msg3, a plain chat turn: the cut moves
    back to msg3, so the whole turn stays raw and nothing is summarised as a split turn."""
    msgs = [
        user("Set up the project."),
        assistant("Done: created the skeleton."),
        user("Now refactor the storage layer."),  # opens the turn the walk lands in
        assistant("Step 1: I split the store into ..."),
        assistant("Step 2: the disk backend now ..."),
        user("Also add tests."),
        assistant("Added tests for ..."),
        user("Run them."),
    ]
    conv = note_conversation(msgs)
    plan = strategy().plan(conv, None, now=0.0)
    assert plan is not None
    assert (plan.start, plan.turn_start, plan.end) == (1, None, 3)
    assert kept_tokens(conv, plan) == 23200  # more than the 22000 the cut at msg4 would keep
    saved = apply_plan(plan, None, now=0.0)
    assert [(b.start, b.end, b.kind) for b in saved.blocks] == [(1, 3, "history")]


def test_a_tool_free_turn_too_long_to_keep_whole_is_still_split() -> None:
    """Kept whole from msg3 the prompt would stay over the trigger (the compaction would not
    settle, and the next request would compact again): the cut stays inside the turn."""
    msgs = [
        user("Set up the project."),
        assistant("Done: created the skeleton."),
        user("Now refactor the storage layer."),
        assistant("Step 1: I split the store into ..."),
        assistant("Step 2: the disk backend now ..."),
        user("Also add tests."),
        assistant("Added tests for ..."),
        user("Run them."),
    ]
    conv = note_conversation(msgs, window=NOTE_WINDOW - 1500)  # trigger 23076 < 23200 kept from msg3
    plan = strategy().plan(conv, None, now=0.0)
    assert plan is not None
    assert (plan.start, plan.turn_start, plan.end) == (1, 3, 4)


def test_cut_inside_a_turn_with_tool_calls_summarises_the_turn_start_separately() -> None:
    """msg4 is an assistant message in the turn opened by msg3, whose work calls a tool: the cut
    stays there and the turn's start is summarised apart."""
    msgs = [
        user("Set up the project."),
        assistant("Done: created the skeleton."),
        user("Now refactor the storage layer."),  # opens the turn that the cut splits
        assistant("Step 1: I split the store into ..."),
        assistant_with(file_call("c1", "edit", path="store.py")),
        tool("c1", "ok"),
        assistant("Refactored."),
        user("Run them."),
    ]
    conv = note_conversation(msgs)
    plan = strategy().plan(conv, None, now=0.0)
    assert plan is not None
    assert (plan.start, plan.turn_start, plan.end) == (1, 3, 4)
    # What the executor does with it: [1, 3) as history, [3, 4) as the turn's prefix.
    saved = apply_plan(plan, None, now=0.0)
    assert [(b.start, b.end, b.kind) for b in saved.blocks] == [(1, 3, "history"), (3, 4, "turn_prefix")]


def test_tool_result_first_kept_moves_the_cut_back_to_its_call() -> None:
    """msg4 answers msg3's call: the kept part starts at msg3 (more than keep_recent_tokens kept)."""
    msgs = [
        user("Why does the build fail?"),
        assistant("Let me look at the logs first."),
        assistant_calls("run_build"),
        tool("call_run_build", "error: ..."),
        assistant("The build fails because ..."),
        user("Fix it."),
        assistant("Fixed ..."),
        user("Thanks, what next?"),
    ]
    conv = note_conversation(msgs)
    plan = strategy().plan(conv, None, now=0.0)
    assert plan is not None
    assert plan.end == 3
    assert conv.messages[plan.end]["tool_calls"]  # the call stays with its result
    assert kept_tokens(conv, plan) == 23200
    # The turn that msg3 continues was opened by msg1, the range start: nothing to split off.
    assert plan.turn_start is None


@pytest.mark.parametrize(
    ("keep", "end"),
    [
        (22000, 4),  # reached exactly at msg4 (≥, not >)
        (22001, 2),  # reached at msg3, a tool result: back to msg2, its call
        (19000, 4),  # reached at msg5, inside the tool-free turn msg4 opens: back to msg4
        (2000, 8),  # the last message alone: the cut may be right before it
    ],
)
def test_keep_recent_tokens_is_a_lower_bound(keep: int, end: int) -> None:
    conv = note_conversation(note_messages())
    plan = strategy(keep_recent_tokens=keep).plan(conv, None, now=0.0)
    assert plan is not None and plan.end == end
    assert kept_tokens(conv, plan) >= keep


def test_no_compaction_at_or_below_budget_minus_reserve() -> None:
    limit = NOTE_FORWARDED + NOTE["reserve_tokens"]
    assert strategy().plan(note_conversation(note_messages(), window=limit), None, now=0.0) is None
    assert strategy().plan(note_conversation(note_messages(), window=limit - 1), None, now=0.0) is not None


def test_reserved_max_tokens_make_it_trigger() -> None:
    window = 44000  # 44000 − 16384 = 27616 ≥ 24603: fits without an answer reservation
    assert strategy().plan(note_conversation(note_messages(), window=window), None, now=0.0) is None
    plan = strategy().plan(note_conversation(note_messages(), window=window, reserve_output=4096), None, now=0.0)
    assert plan is not None and plan.end == 4


def test_reserve_tokens_option() -> None:
    conv = note_conversation(note_messages(), window=30000)
    assert strategy().plan(conv, None, now=0.0) is not None  # 24603 > 30000 − 16384
    assert strategy(reserve_tokens=5000).plan(conv, None, now=0.0) is None  # 24603 ≤ 25000


def grown_note_conversation(summary_tokens: int) -> Conversation:
    """The note's conversation six messages later; tokens of msg9..msg14 after the note's."""
    msgs = [
        *note_messages(),
        assistant("First, back up the config ..."),  # msg9: continues the turn msg8 opened
        user("Done. Now apply the change."),
        assistant_calls("apply_config"),
        tool("call_apply_config", "reloaded: port=9090 ..."),
        assistant("Applied. The service now listens on 9090."),
        user("Great, anything else?"),
    ]
    tokens = [SYSTEM_TOKENS, *NOTE_TOKENS, 6000, 1500, 700, 9000, 2500, 800]
    return conversation([system(), *msgs], tokens, NOTE_WINDOW, summary_tokens=summary_tokens, optimise="tokens")


def test_iterative_compaction_starts_at_the_checkpoint_and_merges() -> None:
    first = strategy().plan(note_conversation(note_messages()), None, now=0.0)
    assert first is not None
    previous = apply_plan(first, None, now=0.0)

    conv = grown_note_conversation(summary_tokens=900)
    # head 100 + summary 900 + messages[4:] 42500 + 3 = 43503 > 24576
    plan = strategy().plan(conv, previous, now=1.0)
    assert plan is not None
    assert plan.start == previous.end == 4
    assert plan.merge is True
    # 800 + 2500 + 9000 + 700 + 1500 = 14500, + 6000 = 20500 ≥ 20000 at msg9, an assistant message
    # in the turn msg8 opened, which calls no tool: the cut moves back to msg8, the turn kept whole.
    assert (plan.turn_start, plan.end) == (None, 8)
    assert kept_tokens(conv, plan) == 22500
    assert plan.state == {"files_read": ["config.toml"], "files_modified": []}  # carried, nothing new

    saved = apply_plan(plan, previous, now=1.0)
    assert [(b.start, b.end, b.kind) for b in saved.blocks] == [(1, 8, "history")]


def test_fresh_summary_keeps_the_prompt_small_enough() -> None:
    """Right after a compaction the same request forwarded with it is under the trigger."""
    first = strategy().plan(note_conversation(note_messages()), None, now=0.0)
    assert first is not None
    tokens = [SYSTEM_TOKENS, *NOTE_TOKENS]
    conv = conversation([system(), *note_messages()], tokens, NOTE_WINDOW, summary_tokens=1500, optimise="tokens")
    assert strategy().plan(conv, apply_plan(first, None, now=0.0), now=1.0) is None


def file_session() -> list[Message]:
    """An agent session reading and editing files; 10 tokens a message in the tests below."""
    return [
        system(),
        user("Look at the app."),  # 1
        assistant_with(file_call("c1", "read_file", path="a.py"), file_call("c2", "fs.read", path="b.py")),
        tool("c1", "..."),
        tool("c2", "..."),
        assistant("a.py looks fine; b.py has a bug."),  # 5
        user("Fix b."),  # 6
        assistant_with(file_call("c3", "edit", path="b.py")),  # 7
        tool("c3", "ok"),
        assistant("Fixed."),
        user("Now write c.py from a.py."),  # 10
        assistant_with(file_call("c4", "read_file", path="c.py"), file_call("c5", "write_file", file_path="c.py")),
        tool("c4", "not found"),
        tool("c5", "ok"),
        assistant("Created c.py."),
        user("Thanks."),  # 15
        assistant("You're welcome."),
        user("Next: docs."),  # 17
    ]


def test_files_are_carried_across_two_compactions() -> None:
    cut_point = strategy(reserve_tokens=0, keep_recent_tokens=30)

    first_messages = file_session()[:11]
    first_conv = conversation(first_messages, 10, window=100, optimise="tokens")
    first = cut_point.plan(first_conv, None, now=0.0)
    assert first is not None
    # 10 + 10 + 10 = 30 at index 8, a tool result: back to its call at 7, in the turn opened by 6.
    assert (first.start, first.turn_start, first.end) == (1, 6, 7)
    assert first.state == {"files_read": ["a.py", "b.py"], "files_modified": []}  # the edit at 7 is kept
    previous = apply_plan(first, None, now=0.0)

    second_conv = conversation(file_session(), 10, window=100, summary_tokens=20, optimise="tokens")
    second = cut_point.plan(second_conv, previous, now=1.0)
    assert second is not None
    assert (second.start, second.turn_start, second.end) == (7, None, 15)
    # b.py edited, c.py read then written: both move to files_modified; a.py was only ever read.
    assert second.state == {"files_read": ["a.py"], "files_modified": ["b.py", "c.py"]}


def test_foreign_or_malformed_checkpoint_state_is_ignored() -> None:
    conv = note_conversation(note_messages(), window=30000)
    previous = checkpoint(1, 2, state={"files_read": "not a list", "files_modified": [3, "x.py"], "other": 1})
    plan = strategy().plan(conv, previous, now=0.0)
    assert plan is not None
    assert plan.state == {"files_read": ["config.toml"], "files_modified": ["x.py"]}


def test_nothing_to_compact_when_the_walk_reaches_the_start() -> None:
    """Over the limit, but everything after the checkpoint is within keep_recent_tokens."""
    conv = note_conversation(note_messages(), window=20000, reserve_output=4000)
    previous = checkpoint(1, 4)
    assert strategy().plan(conv, previous, now=0.0) is None  # 3000..2000 = 22000, reached only at start


def test_never_cuts_at_or_before_the_range_start() -> None:
    msgs = [
        user("Deploy."),
        assistant("Deploying."),
        assistant_calls("deploy"),  # 3: the checkpoint ends here
        tool("call_deploy", "x" * 100),  # 4: keep_recent_tokens is reached on this result
        assistant("Deployed."),
        user("Status?"),
        assistant("Green."),
        user("Thanks."),
    ]
    conv = note_conversation(msgs, window=20000)
    assert strategy(keep_recent_tokens=21000).plan(conv, checkpoint(1, 3), now=0.0) is None


def test_a_huge_last_message_alone_is_not_compacted_away() -> None:
    conv = conversation([system(), user("hi"), assistant("hello"), user("x" * 10)], [10, 10, 10, 50000], 40960)
    plan = strategy().plan(conv, None, now=0.0)
    assert plan is not None and plan.end == 3 == conv.total - 1  # the last message itself is never covered


def test_options_defaults_and_validation() -> None:
    assert CutPointOptions() == CutPointOptions(reserve_tokens=None, keep_recent_tokens=None)  # unset: scaled
    assert CutPointOptions(reserve_tokens=0).reserve_tokens == 0
    for bad in ({"keep_recent_tokens": 0}, {"keep_recent_tokens": -1}, {"reserve_tokens": -1}, {"keepRecent": 1}):
        with pytest.raises(ValidationError):
            CutPointOptions(**bad)
    with pytest.raises(TypeError):
        CutPoint(object())  # type: ignore[arg-type]
    assert STRATEGY is CutPoint and STRATEGY.name == "cut_point" and STRATEGY.options_model is CutPointOptions


# Properties over generated agent sessions -------------------------------------------------------


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int]]:
    messages: list[dict[str, Any]] = [system()]
    for turn in range(draw(st.integers(1, 6))):
        messages.append(user(f"turn {turn}"))
        for step in range(draw(st.integers(0, 3))):
            calls = draw(st.integers(0, 2))
            if calls == 0:
                messages.append(assistant(f"answer {turn}.{step}"))
                continue
            ids = [f"c{turn}_{step}_{k}" for k in range(calls)]
            messages.append(
                assistant_with(
                    *(file_call(i, draw(st.sampled_from(["read", "edit", "bash"])), path=f"{i}.py") for i in ids)
                )
            )
            messages += [tool(i, "result") for i in ids]
    messages.append(user("latest"))
    tokens = draw(st.lists(st.integers(0, 400), min_size=len(messages), max_size=len(messages)))
    return messages, tokens


@settings(max_examples=200, deadline=None)
@given(sessions(), st.integers(1, 1500), st.integers(0, 2000), st.integers(0, 6))
def test_plans_keep_their_invariants(
    session: tuple[list[dict[str, Any]], list[int]], keep: int, window: int, covered: int
) -> None:
    messages, tokens = session
    conv = conversation(messages, tokens, window=window, summary_tokens=50, optimise="tokens")
    valid = [c for c in range(conv.head + 1, conv.total) if is_valid_cut(messages, c)]
    previous = None
    if covered and valid:
        end = valid[min(covered, len(valid)) - 1]
        previous = Checkpoint(end, "x", (Block(conv.head, end, "s"),), 0.0, state={"files_read": ["0.py"]})
    start = conv.head if previous is None else previous.end

    plan = strategy(reserve_tokens=0, keep_recent_tokens=keep).plan(conv, previous, now=0.0)
    if plan is None:
        return
    assert plan.start == start < plan.end <= conv.total - 1
    assert is_valid_cut(messages, plan.end) and plan.merge
    assert conv.tokens_between(plan.end, conv.total) >= keep
    # The latest valid cut that keeps enough (any later one would keep too little), or the user
    # message opening the tool-free turn that cut falls in.
    latest = max(c for c in valid if c > start and conv.tokens_between(c, conv.total) >= keep)
    if latest != plan.end:
        assert messages[plan.end]["role"] == "user" and plan.turn_start is None
        assert all(
            m["role"] in ("assistant", "system") and not m.get("tool_calls")
            for m in messages[plan.end + 1 : latest + 1]
        )
    if plan.turn_start is not None:
        assert start < plan.turn_start < plan.end
        assert messages[plan.turn_start]["role"] == "user"
        assert all(messages[i]["role"] != "user" for i in range(plan.turn_start + 1, plan.end + 1))
    read, modified = plan.state["files_read"], plan.state["files_modified"]
    assert read == sorted(read) and modified == sorted(modified) and not set(read) & set(modified)


# Defaults scaled to the window; the cost mode's room --------------------------------------------


@pytest.mark.parametrize(
    ("budget", "reserve", "keep"),
    [(4096, 614, 1024), (8192, 1228, 2048), (32768, 4915, 8192), (128_000, 16384, 20000), (1_000_000, 16384, 20000)],
)
def test_unset_reserve_and_keep_are_shares_of_the_budget_capped_by_the_notes(
    budget: int, reserve: int, keep: int
) -> None:
    assert CutPointOptions().resolved(budget) == (reserve, keep)
    # A configured value is used as it is, at any window.
    assert CutPointOptions(reserve_tokens=512, keep_recent_tokens=1000).resolved(budget) == (512, 1000)


def chat_of(turns: int, tokens: int, window: int, optimise: Optimise = "cost") -> Conversation:
    messages = [system()]
    for t in range(turns):
        messages += [user(f"question {t}"), assistant(f"answer {t}")]
    messages.append(user("and now?"))
    return conversation(messages, [SYSTEM_TOKENS, *[tokens] * (2 * turns + 1)], window, optimise=optimise)


def test_at_8k_the_defaults_plan_where_the_notes_values_never_could() -> None:
    """The note's reserve (16384) exceeds an 8k window: the trigger is always on, and its keep
    (20000) more than the whole prompt, so it never found a cut (the emergency plan cut instead)."""
    conv = chat_of(20, 200, 8192, optimise="tokens")  # 8303 tokens: does not fit
    assert strategy().plan(conv, None, now=0.0) is None  # the note's values
    plan = CutPoint(CutPointOptions()).plan(conv, None, now=0.0)
    assert plan is not None and plan.reason == "threshold"
    assert conv.tokens_between(plan.end, conv.total) >= 2048  # a quarter of the budget kept


def test_cost_waits_while_the_notes_keep_leaves_no_room_below_the_trigger() -> None:
    """At the note's window a cut keeping 22000 tokens leaves the prompt at 23,303 (with a
    1,200-token summary), within 4,096 (10 %) of the trigger at 24,576: the next turns would
    compact again. With "cost" the plan waits until the prompt does not fit."""
    fits = note_conversation(note_messages(), optimise="cost")
    assert fits.forwarded_tokens(None) <= fits.window.budget
    assert strategy().plan(fits, None, now=0.0) is None
    too_large = note_conversation(note_messages(), window=24000, optimise="cost")
    plan = strategy().plan(too_large, None, now=0.0)
    assert plan is not None and plan.end == 4


@pytest.mark.parametrize("window", [4096, 8192, 32768, 128_000])
def test_cost_defaults_compact_down_far_below_the_trigger(window: int) -> None:
    """With the defaults a compaction leaves the prompt (its summary at its full budget) at
    least 10 % of the budget below the trigger, so the turns after it append."""
    cut_point = CutPoint(CutPointOptions())
    tokens = 300
    turns = window // (2 * tokens)  # just over the window
    conv = replace(chat_of(turns, tokens, window), summary_budget=summary_budget(None, window))
    plan = cut_point.plan(conv, None, now=0.0)
    assert plan is not None
    after = conv.tokens_with_cut(plan.end, conv.summary_allowance(conv.summary_budget))
    assert after <= cut_point.trigger(conv) - 0.1 * window, (after, cut_point.trigger(conv))

"""``rounds`` (note 002): the K = 1..10 table, tool rounds, B per compression, greetings, options;
the cost mode's larger batches and the ``tokens`` rule.

The note's table and rules run with ``optimise = "tokens"`` (B unset is the note's 3 there, and
no catch-up); with ``"cost"`` B unset is 10 and catch-up on (``test_cost_*``)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from ctxproxy.strategies.base import Block, Checkpoint, Conversation, Message, Optimise, Plan
from ctxproxy.strategies.boundaries import is_valid_cut
from ctxproxy.strategies.hysteresis import low_water
from ctxproxy.strategies.rounds import STRATEGY, Rounds, RoundsOptions, round_starts
from tests.strategies.factories import (
    assistant,
    assistant_calls,
    call_id,
    checkpoint,
    conversation,
    system,
    tool,
    user,
)

# Every message's content is "<kind><round>", e.g. "u3", "a3", "t3", so tests can tell which
# round a message belongs to without recomputing the rule under test.


def round_of(message: Message) -> int:
    content = message.get("content") or ""
    return int(content.lstrip("uatgs"))


def simple_round(r: int) -> list[dict[str, Any]]:
    return [user(f"u{r}"), assistant(f"a{r}")]


def tool_round(r: int) -> list[dict[str, Any]]:
    """One round with two tool exchanges: five messages after the user's."""
    return [
        user(f"u{r}"),
        assistant_calls("search", "fetch", text=f"a{r}", ids=[f"s{r}", f"f{r}"]),
        tool(f"s{r}", f"t{r}"),
        tool(f"f{r}", f"t{r}"),
        assistant_calls("lookup", text=f"a{r}", ids=[f"l{r}"]),
        tool(f"l{r}", f"t{r}"),
        assistant(f"a{r}"),
    ]


def client_request(
    k: int, round_messages: Any = simple_round, greeting: bool = False, optimise: Optimise = "tokens"
) -> Conversation:
    """A stateless client's K-th request: rounds 1..K-1 whole, round K just the new user message."""
    messages: list[dict[str, Any]] = [system("s0")]
    if greeting:
        messages.append(assistant("g1"))
    for r in range(1, k):
        messages += round_messages(r)
    messages.append(user(f"u{k}"))
    return conversation(messages, optimise=optimise)


def to_checkpoint(plan: Plan, previous: Checkpoint | None, now: float) -> Checkpoint:
    """What the executor saves: one more Session Memory block per compression."""
    assert plan.merge is False
    blocks = (previous.blocks if previous else ()) + (Block(plan.start, plan.end, "rounds", "rounds"),)
    return Checkpoint(end=plan.end, prefix_hash="x", blocks=blocks, created_at=now, state=plan.state)


def span(rounds: Collection[int]) -> str:
    """``"first..last"`` of rounds that must be contiguous."""
    assert sorted(rounds) == list(range(min(rounds), max(rounds) + 1)), rounds
    return f"{min(rounds)}..{max(rounds)}"


@dataclass
class Request:
    conv: Conversation
    plan: Plan | None
    checkpoint: Checkpoint | None  # after this request's plan was applied

    def compressed_now(self) -> str | None:
        if self.plan is None:
            return None
        return span({round_of(m) for m in self.conv.messages[self.plan.start : self.plan.end]})

    def compressed_through(self) -> int:
        return int(self.checkpoint.state["rounds_through"]) if self.checkpoint else 0

    def raw_rounds(self) -> list[int]:
        start = self.checkpoint.end if self.checkpoint else self.conv.head
        return sorted({round_of(m) for m in self.conv.messages[start:]})

    def session_blocks(self) -> list[str]:
        blocks = self.checkpoint.blocks if self.checkpoint else ()
        return [span({round_of(m) for m in self.conv.messages[b.start : b.end]}) for b in blocks]

    def sent(self) -> str:
        """The note's last column; consecutive Session Memory blocks shown as one span."""
        parts = []
        if self.checkpoint:
            parts.append(f"Session(1..{self.compressed_through()})")
        parts.append(f"raw({span(self.raw_rounds())})")
        return " + ".join(parts) if self.checkpoint else "full raw"


def run_client(
    k_max: int,
    options: RoundsOptions | None = None,
    round_messages: Any = simple_round,
    greeting: bool = False,
    optimise: Optimise = "tokens",
) -> list[Request]:
    """Requests 1..k_max of one client, each planned against the checkpoint the last one left."""
    strategy = Rounds(options or RoundsOptions())
    cp: Checkpoint | None = None
    requests = []
    for k in range(1, k_max + 1):
        conv = client_request(k, round_messages, greeting, optimise)
        plan = strategy.plan(conv, cp, now=float(k))
        if plan is not None:
            assert plan.start == (cp.end if cp else conv.head)
            assert plan.start < plan.end <= conv.total - 1
            assert is_valid_cut(conv.messages, plan.end)
            assert conv.messages[plan.end]["role"] == "user"
            cp = to_checkpoint(plan, cp, now=float(k))
        requests.append(Request(conv, plan, cp))
    return requests


# -- the note's table (A = 4, B = 3) --------------------------------------------------------------

NOTE_TABLE = [
    # K, action (rounds compressed), compressedThrough, uncompressed, sent, Session blocks
    *[(k, None, 0, f"1..{k}", "full raw", []) for k in range(1, 7)],
    (7, "1..3", 3, "4..7", "Session(1..3) + raw(4..7)", ["1..3"]),
    (8, None, 3, "4..8", "Session(1..3) + raw(4..8)", ["1..3"]),
    (9, None, 3, "4..9", "Session(1..3) + raw(4..9)", ["1..3"]),
    (10, "4..6", 6, "7..10", "Session(1..6) + raw(7..10)", ["1..3", "4..6"]),
]


@pytest.mark.parametrize(("k", "action", "through", "uncompressed", "sent", "blocks"), NOTE_TABLE)
def test_note_table(k: int, action: str | None, through: int, uncompressed: str, sent: str, blocks: list[str]) -> None:
    request = run_client(k)[-1]
    assert request.compressed_now() == action
    if action is not None:
        assert request.plan is not None and request.plan.reason == "rounds"
    assert request.compressed_through() == through
    assert span(request.raw_rounds()) == uncompressed
    assert request.sent() == sent
    assert request.session_blocks() == blocks  # separate blocks, oldest first, never merged


def test_table_continues_every_three_rounds() -> None:
    compressed = {k: r.compressed_now() for k, r in enumerate(run_client(22), start=1) if r.plan is not None}
    assert compressed == {7: "1..3", 10: "4..6", 13: "7..9", 16: "10..12", 19: "13..15", 22: "16..18"}


@pytest.mark.parametrize(("full", "cached"), [(1, 1), (1, 3), (2, 2), (4, 3), (3, 5)])
def test_invariants_for_other_a_and_b(full: int, cached: int) -> None:
    requests = run_client(30, RoundsOptions(full_context_turns=full, cached_context_turns=cached))
    for request in requests:
        raw = len(request.raw_rounds())
        assert full <= raw < full + cached or request.checkpoint is None
        if request.plan is not None:
            assert len({round_of(m) for m in request.conv.messages[request.plan.start : request.plan.end]}) == cached
    last = requests[-1]
    assert last.checkpoint is not None
    for block in last.checkpoint.blocks:
        assert len({round_of(m) for m in last.conv.messages[block.start : block.end]}) == cached
    assert last.compressed_through() + len(last.raw_rounds()) == 30


# -- what a round is ------------------------------------------------------------------------------


def test_a_round_with_tool_calls_counts_once_and_is_compressed_whole() -> None:
    request = run_client(7, round_messages=tool_round)[-1]
    assert request.plan is not None
    assert request.compressed_now() == "1..3"
    assert (request.plan.start, request.plan.end) == (1, 1 + 3 * 7)
    assert request.conv.messages[request.plan.end] == user("u4")
    assert request.conv.messages[request.plan.end - 1] == assistant("a3")  # the round's final answer
    assert span(request.raw_rounds()) == "4..7"


def test_tool_rounds_follow_the_same_table() -> None:
    with_tools = [
        (r.compressed_now(), r.compressed_through(), r.raw_rounds()) for r in run_client(13, round_messages=tool_round)
    ]
    plain = [(r.compressed_now(), r.compressed_through(), r.raw_rounds()) for r in run_client(13)]
    assert with_tools == plain


def test_the_current_round_may_hold_tool_exchanges() -> None:
    # An agent loop: the last message is a tool result inside the current (7th) round.
    messages: list[dict[str, Any]] = [system("s0")]
    for r in range(1, 7):
        messages += simple_round(r)
    messages += [user("u7"), assistant_calls("search", text="a7"), tool(call_id("search"), "t7")]
    plan = Rounds(RoundsOptions()).plan(conversation(messages, optimise="tokens"), None, now=0.0)
    assert plan is not None and plan.end == messages.index(user("u4"))


def test_greeting_before_the_first_user_message_belongs_to_round_one() -> None:
    requests = run_client(7, greeting=True)
    assert all(r.plan is None for r in requests[:6])
    last = requests[-1]
    assert last.plan is not None
    assert last.conv.messages[last.plan.start] == assistant("g1")  # start = head, the greeting
    assert last.compressed_now() == "1..3"
    assert last.conv.messages[last.plan.end] == user("u4")


def test_round_starts() -> None:
    messages = [system("s"), assistant("g"), user("u1"), assistant("a1"), user("u2"), system("mid"), user("u3")]
    assert round_starts(messages, 1) == [1, 4, 6]  # greeting joins round 1
    assert round_starts(messages, 2) == [2, 4, 6]
    # A start inside a round (a checkpoint another strategy cut at an assistant message): the
    # rest of that round joins the next, like a greeting, so no round is counted twice.
    assert round_starts(messages, 3) == [3, 6]
    assert round_starts(messages, 7) == []
    assert round_starts([system("s"), assistant("g")], 1) == [1]


def test_a_system_message_inside_a_round_stays_in_it() -> None:
    messages: list[dict[str, Any]] = [system("s0")]
    for r in range(1, 7):
        messages += simple_round(r)
        if r == 2:
            messages.append(system("s2"))
    messages.append(user("u7"))
    plan = Rounds(RoundsOptions()).plan(conversation(messages, optimise="tokens"), None, now=0.0)
    assert plan is not None and messages[plan.end] == user("u4")
    assert system("s2") in messages[plan.start : plan.end]


def test_no_user_messages_means_one_round() -> None:
    messages = [system("s")] + [assistant(f"a{i}") for i in range(20)]
    assert (
        Rounds(RoundsOptions(full_context_turns=1, cached_context_turns=1)).plan(conversation(messages), None, 0.0)
        is None
    )


# -- B exactly per compression, and catch-up ------------------------------------------------------


def test_a_client_arriving_with_twenty_rounds_gets_b_compressed_per_request() -> None:
    strategy = Rounds(RoundsOptions())
    conv = client_request(20)
    plan = strategy.plan(conv, None, now=0.0)
    assert plan is not None and plan.reason == "rounds"
    assert span({round_of(m) for m in conv.messages[plan.start : plan.end]}) == "1..3"
    assert plan.state == {"rounds_through": 3}
    cp = to_checkpoint(plan, None, now=0.0)
    # The same messages planned again against each new checkpoint: the next B, and so on.
    compressed = []
    while (plan := strategy.plan(conv, cp, now=0.0)) is not None:
        compressed.append(span({round_of(m) for m in conv.messages[plan.start : plan.end]}))
        cp = to_checkpoint(plan, cp, now=0.0)
    assert compressed == ["4..6", "7..9", "10..12", "13..15"]
    assert len(cp.blocks) == 5
    assert cp.state == {"rounds_through": 15}
    assert len(round_starts(conv.messages, cp.end)) == 5  # A <= raw < A + B


def test_catch_up_compresses_every_whole_batch_at_once() -> None:
    strategy = Rounds(RoundsOptions(catch_up=True))
    conv = client_request(20)
    plan = strategy.plan(conv, None, now=0.0)
    assert plan is not None and plan.reason == "catch_up" and plan.merge is False
    assert span({round_of(m) for m in conv.messages[plan.start : plan.end]}) == "1..15"
    assert plan.state == {"rounds_through": 15}
    assert strategy.plan(conv, to_checkpoint(plan, None, 0.0), now=0.0) is None


def test_catch_up_matches_the_note_when_rounds_arrive_one_by_one() -> None:
    plain = [(r.compressed_now(), r.compressed_through()) for r in run_client(16)]
    caught_up = [(r.compressed_now(), r.compressed_through()) for r in run_client(16, RoundsOptions(catch_up=True))]
    assert caught_up == plain


def test_rounds_through_is_derived_when_the_checkpoint_lacks_it() -> None:
    conv = client_request(10)
    cp = checkpoint(1, conv.messages.index(user("u4")))  # e.g. written by another strategy
    plan = Rounds(RoundsOptions()).plan(conv, cp, now=0.0)
    assert plan is not None and plan.state == {"rounds_through": 6}
    assert conv.messages[plan.end] == user("u7")


def test_stored_rounds_through_is_used() -> None:
    conv = client_request(10)
    cp = checkpoint(1, conv.messages.index(user("u4")), state={"rounds_through": 3})
    plan = Rounds(RoundsOptions()).plan(conv, cp, now=0.0)
    assert plan is not None and plan.state == {"rounds_through": 6}


# -- options --------------------------------------------------------------------------------------


def test_defaults_are_the_notes() -> None:
    assert RoundsOptions().model_dump() == {
        "full_context_turns": 4,  # the note's A
        "cached_context_turns": None,  # B unset: the note's 3 with "tokens", 10 with "cost"
        "catch_up": None,  # unset: off with "tokens", on with "cost"
        "block_ratio": 0.25,
        "min_block_tokens": 64,
        "memory_ratio": 0.3,
    }
    assert (RoundsOptions().batch("tokens"), RoundsOptions().catches_up("tokens")) == (3, False)
    assert (RoundsOptions().batch("cost"), RoundsOptions().catches_up("cost")) == (10, True)
    configured = RoundsOptions(cached_context_turns=3, catch_up=False)
    assert (configured.batch("cost"), configured.catches_up("cost")) == (3, False)
    assert STRATEGY is Rounds and STRATEGY.name == "rounds" and STRATEGY.options_model is RoundsOptions


@pytest.mark.parametrize(
    "raw",
    [
        {"full_context_turns": 0},
        {"cached_context_turns": 0},
        {"cached_context_turns": -3},
        {"full_context_turns": "four"},
        {"catch_up": "maybe"},
        {"A": 4},  # unknown key
    ],
)
def test_invalid_options_are_rejected(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        RoundsOptions.model_validate(raw)
    assert next(iter(raw)) in str(info.value)


def test_strategy_needs_its_own_options() -> None:
    from ctxproxy.strategies.none import NoneOptions

    with pytest.raises(TypeError):
        Rounds(NoneOptions())


def test_block_budget_is_a_share_of_what_it_covers() -> None:
    messages = [system("s")] + [m for k in range(1, 8) for m in (user(f"q{k}"), assistant(f"a{k}"))][:-1]
    conv = conversation(messages, tokens=100, window=100_000, optimise="tokens")
    plan = Rounds(RoundsOptions()).plan(conv, None, now=0.0)
    assert plan is not None and plan.merge is False and plan.block_kind == "rounds"
    covered = conv.tokens_between(plan.start, plan.end)
    assert plan.max_tokens == int(covered * 0.25)


def test_session_memory_folds_when_it_would_outgrow_its_share_of_the_window() -> None:
    messages = [system("s")] + [m for k in range(1, 8) for m in (user(f"q{k}"), assistant(f"a{k}"))][:-1]
    roomy = conversation(messages, tokens=100, window=100_000, summary_tokens=500, optimise="tokens")
    tight = conversation(messages, tokens=100, window=2_000, summary_tokens=500, optimise="tokens")
    assert Rounds(RoundsOptions()).plan(roomy, None, now=0.0).merge is False
    folded = Rounds(RoundsOptions()).plan(tight, None, now=0.0)
    assert folded is not None and folded.merge is True and folded.reason == "fold"
    assert folded.block_kind == "rounds"


# -- the cost mode, and the tokens rule ----------------------------------------------------------


def test_cost_compresses_ten_rounds_once_fourteen_are_uncompressed() -> None:
    compressed = {
        k: r.compressed_now() for k, r in enumerate(run_client(40, optimise="cost"), start=1) if r.plan is not None
    }
    assert compressed == {14: "1..10", 24: "11..20", 34: "21..30"}  # A = 4 raw, up to A + B − 1 = 13


def test_cost_catches_up_a_client_arriving_with_many_rounds_at_once() -> None:
    conv = client_request(30, optimise="cost")
    plan = Rounds(RoundsOptions()).plan(conv, None, now=0.0)
    assert plan is not None and plan.reason == "catch_up"
    assert span({round_of(m) for m in conv.messages[plan.start : plan.end]}) == "1..20"  # (30 − 4) // 10 × 10


def large_rounds(count: int, tokens: int, window: int, optimise: Optimise) -> Conversation:
    messages: list[dict[str, Any]] = [system("s0")]
    for r in range(1, count):
        messages += simple_round(r)
    messages.append(user(f"u{count}"))
    return conversation(messages, [10, *[tokens] * (len(messages) - 1)], window, optimise=optimise)


@pytest.mark.parametrize("optimise", ["cost", "tokens"])
def test_the_tokens_rule_compresses_enough_rounds_to_reach_half_the_budget(optimise: Optimise) -> None:
    """Six rounds (five of 2 × 700 tokens, then the new question) reach 90 % of an 8k window
    (7,713 tokens) before A + B rounds gather: the oldest rounds are compressed until the prompt,
    the new block counted at its budget (a quarter of what it covers) and heading, is at most
    half the budget — fewer than A rounds stay raw if they must."""
    conv = large_rounds(6, 700, 8192, optimise)
    assert conv.forwarded_tokens(None) == 7713 >= 0.9 * 8192
    plan = Rounds(RoundsOptions()).plan(conv, None, now=0.0)
    assert plan is not None and plan.reason == "tokens" and plan.merge is False
    compressed = {round_of(m) for m in conv.messages[plan.start : plan.end]}
    # Three rounds: 10 + (1050 + 16) + 2 × 1400 + 700 + 3 = 4579 > 4096; four: 3529.
    if optimise == "tokens":
        assert span(compressed) == "1..4"
        assert plan.max_tokens == 1400
        assert conv.tokens_with_cut(plan.end, plan.max_tokens + 16) == 3529
        assert plan.state == {"rounds_through": 4}
    else:  # turns this large leave room for few requests above half the budget: aims at a quarter,
        # and compresses every round but the newest (whose block, at a quarter of 7,000, is too big)
        assert (
            low_water(conv) == 10 + (8192 - 10) // 4
            and span(compressed) == "1..5"
            and plan.state == {"rounds_through": 5}
        )
        assert conv.tokens_with_cut(plan.end, (plan.max_tokens or 0) + 16) == 10 + 1750 + 16 + 700 + 3


@pytest.mark.parametrize("optimise", ["cost", "tokens"])
def test_the_tokens_rule_compresses_the_start_of_a_newest_round_over_the_mark(optimise: Optimise) -> None:
    """An agent's turn of four 2,000-token tool results in an 8k window: all but the newest round
    is not enough, so the start of that round is compressed too, at a cut between a tool's result
    and the next call (until then the emergency plan did it, 14–31 times a replay at 8k)."""
    messages: list[dict[str, Any]] = [system("s0"), user("u1"), assistant("a1"), user("u2")]
    for n in range(4):
        messages += [assistant_calls(f"t{n}"), tool(call_id(f"t{n}"), f"output {n}")]
    tokens = [10, 300, 300, 40, *[30, 2000] * 4]
    conv = conversation(messages, tokens, 8192, optimise=optimise)
    assert conv.forwarded_tokens(None) >= 0.9 * 8192
    plan = Rounds(RoundsOptions()).plan(conv, None, now=0.0)
    assert plan is not None and plan.reason == "tokens" and plan.merge is False and plan.start == 1
    assert messages[plan.end]["role"] == "assistant" and plan.end > 3  # inside round 2, before a call
    assert conv.tokens_with_cut(plan.end, (plan.max_tokens or 0) + 16) <= 0.5 * 8192
    assert plan.state == {"rounds_through": 1}  # round 2 is counted once compressed whole
    # The rest of round 2 is the first round from the new checkpoint on.
    assert round_starts(messages, plan.end) == [plan.end]


def test_the_tokens_rule_waits_with_cost_when_the_newest_round_leaves_no_room() -> None:
    """The newest round alone takes most of the budget: compressing everything else would leave
    the prompt near the trigger, so with "cost" nothing is done while it fits."""
    messages = [system("s0"), user("u1"), assistant("a1"), user("u2"), assistant("a2"), user("u3")]
    tokens = [10, 300, 300, 300, 300, 6600]
    cost = conversation(messages, tokens, 8192, optimise="cost")
    assert 0.9 * 8192 <= cost.forwarded_tokens(None) <= 8192
    assert Rounds(RoundsOptions()).plan(cost, None, now=0.0) is None
    tokens_mode = conversation(messages, tokens, 8192, optimise="tokens")
    plan = Rounds(RoundsOptions()).plan(tokens_mode, None, now=0.0)
    assert plan is not None and plan.reason == "tokens" and messages[plan.end] == user("u3")

"""``paged`` (note 004): pages, the archival trigger (count and token pressure), never a split page;
the cost mode's larger batches and pressure down to the low-water mark.

The note's rules run with ``optimise = "tokens"`` (``conversation`` below: ``archive_batch`` unset
is its 4 there, and pressure archives until the prompt fits); with ``"cost"`` the batch unset is
10 and pressure fires at 90 % of the budget and aims at half of it (``test_cost_*``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import ValidationError

from ctxproxy.strategies.base import Block, Checkpoint, Conversation, Message, Plan
from ctxproxy.strategies.boundaries import is_valid_cut
from ctxproxy.strategies.paged import (
    CONTENTS_KIND,
    STRATEGY,
    PagedOptions,
    PagedStrategy,
    PageSpan,
    contents_growth,
    split_pages,
    turn_number,
)
from ctxproxy.strategies.registry import builtin_registry
from tests.compaction.gen import conversations, user_turns
from tests.strategies.factories import (
    assistant,
    assistant_calls,
    checkpoint,
    developer,
    system,
    tool,
    user,
)
from tests.strategies.factories import conversation as factory_conversation


def conversation(*args: Any, **kwargs: Any) -> Conversation:
    """The conversation as the strategy sees it, with ``optimise = "tokens"`` unless told otherwise."""
    return factory_conversation(*args, **{"optimise": "tokens", **kwargs})


def strategy(**options: Any) -> PagedStrategy:
    return PagedStrategy(PagedOptions(**options))


def interaction(n: int) -> list[dict[str, Any]]:
    """Page ``n`` of a coding session: a question, two tool rounds, an answer."""
    return [
        user(f"Question {n}: why does test_{n} fail?"),
        assistant_calls("read_file", ids=[f"r{n}"]),
        tool(f"r{n}", f"contents of file {n}"),
        assistant_calls("run_tests", "grep", ids=[f"t{n}", f"g{n}"]),
        tool(f"t{n}", "1 failed"),
        tool(f"g{n}", "no match"),
        assistant(f"Answer {n}: the fixture is stale."),
    ]


def request(turn: int, page: Any = interaction) -> list[dict[str, Any]]:
    """A stateless client's request at ``turn``: pages 1..turn-1 whole, then the new question."""
    messages: list[dict[str, Any]] = [system("You are a coding agent.")]
    for n in range(1, turn):
        messages += page(n)
    messages.append(user(f"Question {turn}: why does test_{turn} fail?"))
    return messages


def contents_checkpoint(plan: Plan, head: int = 1) -> Checkpoint:
    """What the executor saves for a paged plan (the text does not matter to the strategy)."""
    return Checkpoint(plan.end, "x" * 64, (Block(head, plan.end, "## Contents Page", CONTENTS_KIND),), 0.0, state={})


def page_of(messages: list[Message], i: int) -> int:
    return next(p.page for p in split_pages(messages, 1) if p.start <= i < p.end)


# --- pages -----------------------------------------------------------------------------------


def test_a_page_is_a_user_message_and_what_answers_it() -> None:
    messages = request(3)  # system, page 1 (7), page 2 (7), page 3 (the new question)
    assert split_pages(messages, 1) == [PageSpan(1, 1, 8), PageSpan(2, 8, 15), PageSpan(3, 15, 16)]


def test_tool_calls_and_results_stay_in_their_page() -> None:
    messages = request(4)
    for page in split_pages(messages, 1):
        inside = messages[page.start : page.end]
        assert inside[0]["role"] == "user"
        calls = {c["id"] for m in inside for c in m.get("tool_calls") or []}
        results = {m["tool_call_id"] for m in inside if m["role"] == "tool"}
        assert calls == results


def test_a_greeting_before_the_first_user_message_joins_page_1() -> None:
    messages = [
        system(),
        developer("be brief"),
        assistant("Hi! How can I help?"),
        user("u1"),
        assistant("a1"),
        user("u2"),
    ]
    assert split_pages(messages, 2) == [PageSpan(1, 2, 5), PageSpan(2, 5, 6)]


def test_system_messages_inside_the_history_stay_in_their_page() -> None:
    messages = [system(), user("u1"), system("now answer in French"), assistant("a1"), user("u2"), developer("d")]
    assert split_pages(messages, 1) == [PageSpan(1, 1, 4), PageSpan(2, 4, 6)]


def test_pages_tile_the_history_even_without_a_user_message() -> None:
    assert split_pages([system(), assistant("hello")], 1) == [PageSpan(1, 1, 2)]
    assert split_pages([system()], 1) == []
    assert split_pages([user("only")], 0) == [PageSpan(1, 0, 1)]


def test_page_numbers_are_stable_as_the_conversation_grows() -> None:
    before = split_pages(request(5), 1)
    after = split_pages(request(9), 1)
    assert after[:4] == before[:4]  # page 5 was in progress, it has grown since


def test_turn_is_the_number_of_user_messages() -> None:
    assert turn_number(request(7)) == 7
    assert turn_number([system()]) == 0


# --- options and registration ----------------------------------------------------------------


def test_defaults_follow_note_004() -> None:
    options = PagedOptions()
    assert (options.active_pages, options.contents_budget(None)) == (5, 2000)
    assert (options.evict_unrecalled_after, options.evict_idle_after, options.evict_to_ratio) == (10, 20, 0.8)
    assert (options.batch("tokens"), options.batch("cost")) == (4, 10)  # unset: by optimise
    # Unset, the Contents Page's budget is a fifth of the request's budget, at most the note's 2000.
    assert [options.contents_budget(b) for b in (4096, 8192, 128_000)] == [819, 1638, 2000]
    configured = PagedOptions(archive_batch=4, contents_max_tokens=2000)
    assert (configured.batch("cost"), configured.contents_budget(4096)) == (4, 2000)


@pytest.mark.parametrize(
    "bad",
    [{"active_pages": 0}, {"archive_batch": 0}, {"evict_to_ratio": 1.5}, {"evict_to_ratio": 0}, {"pages": 3}],
)
def test_bad_options_are_rejected(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        PagedOptions(**bad)


def test_registered_as_a_builtin() -> None:
    registry = builtin_registry()
    assert registry["paged"] is STRATEGY
    built = registry.build("paged", registry.options("paged", {"active_pages": 2}))
    assert isinstance(built, PagedStrategy) and built.options.active_pages == 2
    with pytest.raises(TypeError):
        PagedStrategy(registry.options("rounds", {}))


# --- the count trigger -----------------------------------------------------------------------


def test_archives_in_batches_keeping_the_newest_active_pages() -> None:
    """A client resending its history, turn by turn: archivals at turns 9, 13, 17 (5 + 4 pages),
    and in between the prefix does not change (no plan)."""
    paged = strategy()
    current: Checkpoint | None = None
    archived_at: dict[int, list[int]] = {}
    raw_pages: list[int] = []
    for turn in range(1, 19):
        conv = conversation(request(turn))
        plan = paged.plan(conv, current, 0.0)
        if plan is not None:
            archived_at[turn] = [page for page, _, _ in plan.state["archive"]]
            assert plan.state["turn"] == turn
            current = contents_checkpoint(plan)
        start = current.end if current else 1
        raw_pages.append(len([p for p in split_pages(conv.messages, 1) if p.start >= start]))
    assert archived_at == {9: [1, 2, 3, 4], 13: [5, 6, 7, 8], 17: [9, 10, 11, 12]}
    assert raw_pages == [1, 2, 3, 4, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6]


def test_the_plan_covers_whole_pages_from_where_the_raw_history_begins() -> None:
    conv = conversation(request(9))
    plan = strategy().plan(conv, None, 0.0)
    assert plan is not None
    assert (plan.start, plan.end) == (1, 29)  # pages 1-4 are messages 1..28
    assert conv.messages[plan.end]["content"].startswith("Question 5")
    assert plan.merge is False and plan.block_kind == CONTENTS_KIND and plan.reason == "pages"
    archive = [[1, 1, 8], [2, 8, 15], [3, 15, 22], [4, 22, 29]]
    assert plan.state == {"turn": 9, "archive": archive, "contents_max_tokens": 1638}  # a fifth of 8192
    # With the checkpoint it makes, the same request plans nothing more.
    assert strategy().plan(conv, contents_checkpoint(plan), 0.0) is None


def test_archiving_continues_from_the_checkpoint() -> None:
    first = strategy().plan(conversation(request(9)), None, 0.0)
    assert first is not None
    plan = strategy().plan(conversation(request(13)), contents_checkpoint(first), 0.0)
    assert plan is not None
    assert plan.start == first.end
    assert [p for p, _, _ in plan.state["archive"]] == [5, 6, 7, 8]


def test_a_mid_tool_loop_request_does_not_count_as_a_new_page() -> None:
    """Requests inside one turn (the client sends tool results) grow the newest page only."""
    messages = request(8)
    messages += [assistant_calls("read_file", ids=["x"]), tool("x", "...")]
    assert strategy().plan(conversation(messages), None, 0.0) is None
    assert len(split_pages(messages, 1)) == 8


def test_active_pages_and_batch_are_options() -> None:
    plan = strategy(active_pages=1, archive_batch=1).plan(conversation(request(2)), None, 0.0)
    assert plan is not None and plan.state["archive"] == [[1, 1, 8]]


# --- the token-pressure trigger --------------------------------------------------------------


def big_page(n: int) -> list[dict[str, Any]]:
    return [user(f"u{n}"), assistant(f"a{n}")]


def test_pressure_archives_the_oldest_pages_until_the_prompt_fits() -> None:
    messages = request(4, big_page)  # system, 3 pages of 2 messages, the newest question
    conv = conversation(messages, tokens=[10, 400, 400, 400, 400, 400, 400, 10], window=2100)
    assert conv.forwarded_tokens(None) > 2100
    plan = strategy().plan(conv, None, 0.0)
    assert plan is not None and plan.reason == "pressure"
    # Archiving page 1 leaves 1623 tokens and a Contents Page estimated at 90 + 324 (a summary
    # line and two entry lines, each counted as the most a line may cost): 2037 fits 2100.
    assert [p for p, _, _ in plan.state["archive"]] == [1]
    assert contents_growth(conv, split_pages(messages, 1)[:1]) == 3 * 108
    assert conv.tokens_with_cut(plan.end, 90 + 324) == 2037


def test_pressure_keeps_at_least_the_newest_page_raw() -> None:
    messages = request(4, big_page)
    conv = conversation(messages, tokens=[10, 50, 50, 50, 50, 50, 50, 5000], window=2000)
    plan = strategy().plan(conv, None, 0.0)
    assert plan is not None
    assert plan.end == 7 and messages[plan.end] is messages[-1]  # everything but the newest page
    assert strategy().plan(conv, contents_checkpoint(plan), 0.0) is None  # nothing left to archive


def test_pressure_counts_the_existing_contents_page() -> None:
    """With a paged checkpoint the Contents Page stays (and grows); its size is conv.summary_tokens."""
    messages = request(5, big_page)  # pages 1-4 whole, page 5 new
    first = Plan(1, 3, "pages", merge=False, block_kind=CONTENTS_KIND, state={})
    tokens = [10] + [300] * 8 + [10]
    small = conversation(messages, tokens=tokens, window=1900, summary_tokens=100)
    large = conversation(messages, tokens=tokens, window=1900, summary_tokens=1000)
    # The note's Contents Page budget (unset, a fifth of this 1,900-token budget, 380, would bound
    # the estimate below the current page: eviction brings it under that budget).
    paged = strategy(contents_max_tokens=2000)
    plan_small = paged.plan(small, contents_checkpoint(first), 0.0)
    plan_large = paged.plan(large, contents_checkpoint(first), 0.0)
    assert plan_small is not None and plan_large is not None
    # small: 1923 tokens > 1900; without page 2 it is 10 + 1213 kept + 100 + 324 growth ≈ 1650.
    # large: the 1000-token Contents Page leaves room only once pages 2-4 are all archived.
    assert [p for p, _, _ in plan_small.state["archive"]] == [2]
    assert [p for p, _, _ in plan_large.state["archive"]] == [2, 3, 4]


def test_no_plan_when_it_fits_and_few_pages() -> None:
    assert strategy().plan(conversation(request(8), window=100_000), None, 0.0) is None
    assert strategy().plan(conversation([system(), user("hi")]), None, 0.0) is None


def test_growth_estimate_is_bounded_by_the_line_caps() -> None:
    messages = [system(), user("u")] + [assistant(f"a{i}") for i in range(40)] + [user("next")]
    conv = conversation(messages, tokens=[10, 10] + [5000] * 40 + [10])
    growth = contents_growth(conv, split_pages(messages, 1)[:1])
    assert growth <= 13 * (104 + 4) + 4  # a summary line and at most 12 lines, none over ~104 tokens


# --- other checkpoints -----------------------------------------------------------------------


def test_another_strategys_checkpoint_is_archived_again_from_the_head() -> None:
    conv = conversation(request(9))
    foreign = checkpoint(1, 15, text="## Context Summary ...")  # a cut_point summary of pages 1-2
    plan = strategy().plan(conv, foreign, 0.0)
    assert plan is not None and plan.start == 1
    assert [p for p, _, _ in plan.state["archive"]] == [1, 2, 3, 4]


def test_a_paged_checkpoint_that_ends_inside_a_page_is_not_trusted() -> None:
    conv = conversation(request(9))
    odd = contents_checkpoint(Plan(1, 10, "pages", merge=False, block_kind=CONTENTS_KIND))  # inside page 2
    plan = strategy().plan(conv, odd, 0.0)
    assert plan is not None and plan.start == 1 and plan.state["archive"][0] == [1, 1, 8]


# --- invariants over generated conversations ------------------------------------------------


def check_plan(conv: Conversation, plan: Plan) -> None:
    pages = split_pages(conv.messages, conv.head)
    starts = {p.start for p in pages}
    assert plan.end in starts and plan.end > plan.start  # never splits a page
    assert conv.messages[plan.end]["role"] == "user" and is_valid_cut(conv.messages, plan.end)
    assert plan.end <= pages[-1].start  # the newest page stays raw
    spans = [PageSpan(*s) for s in plan.state["archive"]]
    assert spans == [p for p in pages if plan.start <= p.start < plan.end]
    assert spans[0].start == plan.start and spans[-1].end == plan.end


def check_pressure(conv: Conversation, checkpoint: Checkpoint | None, plan: Plan, options: PagedOptions) -> None:
    """A pressure plan archives the fewest pages whose estimate (``tokens_with_cut`` with the
    Contents Page grown by ``contents_growth``, capped) fits; all but the newest if none does."""
    pages = [p for p in split_pages(conv.messages, conv.head) if p.start >= plan.start]
    current = conv.summary_tokens if checkpoint is not None and checkpoint.end == plan.start else 90

    def fits(count: int) -> bool:
        contents = min(current + contents_growth(conv, pages[:count]), options.contents_max_tokens + 90)
        return conv.tokens_with_cut(pages[count].start, contents) <= conv.window.budget

    count = len(plan.state["archive"])
    assert fits(count) or count == len(pages) - 1
    assert count == 1 or not fits(count - 1) or count == len(pages) - options.active_pages


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=conversations(max_messages=60, max_turns=20))
def test_plans_on_generated_conversations_never_split_a_page(messages: list[Message]) -> None:
    paged = strategy(active_pages=2, archive_batch=2, contents_max_tokens=300)
    current: Checkpoint | None = None
    head = conversation(messages).head
    for u in user_turns(messages):
        sent = messages[: u + 1]
        tokens = [20 + 7 * (i % 5) + (150 if m["role"] == "system" else 0) for i, m in enumerate(sent)]
        conv = conversation(sent, tokens=tokens, window=900, summary_tokens=120 if current else 0)
        plan = paged.plan(conv, current, 0.0)
        if plan is None:
            continue
        check_plan(conv, plan)
        if plan.reason == "pressure":
            check_pressure(conv, current, plan, paged.options)
        if current is not None and current.end > head:
            assert plan.start == current.end
        current = contents_checkpoint(plan, head)


# --- the cost mode ---------------------------------------------------------------------------


def test_cost_archives_ten_pages_at_a_time() -> None:
    paged = strategy()
    current: Checkpoint | None = None
    archived_at: dict[int, list[int]] = {}
    for turn in range(1, 31):
        plan = paged.plan(conversation(request(turn), window=1_000_000, optimise="cost"), current, 0.0)
        if plan is not None:
            archived_at[turn] = [page for page, _, _ in plan.state["archive"]]
            current = contents_checkpoint(plan)
    assert archived_at == {15: list(range(1, 11)), 25: list(range(11, 21))}


def test_cost_pressure_fires_at_the_high_water_mark_and_archives_down_to_half() -> None:
    """Seven pages of 2 × 300 tokens (4,223 with the system prompt and the question) reach 90 % of
    a 4,600-token window before the batch is due: the oldest pages are archived until the
    estimate (the Contents Page grown by at most 324 tokens a page) is at most half the budget."""
    messages = request(8, big_page)
    tokens = [10] + [300] * 14 + [10]
    cost = conversation(messages, tokens=tokens, window=4600, optimise="cost")
    assert 0.9 * 4600 <= cost.forwarded_tokens(None) == 4223 <= 4600
    assert strategy().plan(conversation(messages, tokens=tokens, window=4600), None, 0.0) is None  # fits
    plan = strategy().plan(cost, None, 0.0)
    assert plan is not None and plan.reason == "pressure"
    archived = [p for p, _, _ in plan.state["archive"]]
    contents = min(90 + len(archived) * 324, PagedOptions().contents_budget(4600) + 90)
    assert cost.tokens_with_cut(plan.end, contents) <= 0.5 * 4600
    fewer = min(90 + (len(archived) - 1) * 324, PagedOptions().contents_budget(4600) + 90)
    assert cost.tokens_with_cut(split_pages(messages, 1)[len(archived) - 1].start, fewer) > 0.5 * 4600

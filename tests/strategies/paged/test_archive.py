"""Executing a ``paged`` plan: the Contents Page checkpoint, its tiling, state and the raw pages."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from ctxproxy.compaction.assemble import assemble, breaks_tool_pairs
from ctxproxy.session import PrefixChain
from ctxproxy.strategies.base import Block, Checkpoint, Message
from ctxproxy.strategies.boundaries import leading_system_count
from ctxproxy.strategies.dates import exchange_dates
from ctxproxy.strategies.paged import (
    CONTENTS_KIND,
    PagedOptions,
    PagedStrategy,
    archived_end,
    split_pages,
    turn_number,
    unarchived_pages,
)
from ctxproxy.strategies.paged.archive import archive_pages, archived_spans, page_key_suffix
from ctxproxy.strategies.paged.contents import CONTENTS_HEADER, RecallStat, archive_index, decode_entries
from ctxproxy.strategies.paged.lines import PageLines
from ctxproxy.strategies.registry import builtin_registry
from ctxproxy.summarize.pagelines import extractive_page_lines
from tests.compaction.gen import conversations, user_turns
from tests.strategies.factories import conversation, tool
from tests.strategies.paged.deploys import archive, count, request

OPTIONS = PagedOptions()
KINDS = builtin_registry().kinds


def test_one_contents_block_tiles_head_to_end() -> None:
    messages = request(9)
    plan, result = archive(messages)
    made = result.checkpoint
    assert made.end == plan.end == 17
    assert made.prefix_hash == PrefixChain.of(messages).prefix_hash(17).hex()
    [block] = made.blocks
    assert (block.start, block.end, block.kind) == (1, 17, CONTENTS_KIND)
    assert block.text.startswith(CONTENTS_HEADER)
    assert "[Page #1] User: Question 1: how do I deploy service-1 to staging?" in block.text
    assert "  - Assistant: Run `make deploy-4`." in block.text and "[Page #5]" not in block.text
    assert made.created_at == 123.0 and made.summarizer == "extractive"


def test_the_archived_pages_are_returned_raw_with_their_keys() -> None:
    messages = request(9)
    _, result = archive(messages)
    chain = PrefixChain.of(messages)
    assert [(p.page, p.start, p.end) for p in result.pages] == [(1, 1, 5), (2, 5, 9), (3, 9, 13), (4, 13, 17)]
    for p in result.pages:
        assert p.messages == tuple(messages[p.start : p.end])
        assert p.key == f"{p.page}:{chain.prefix_hash(p.end).hex()[:16]}" == page_key_suffix(chain, p.page, p.end)


def test_a_forked_page_gets_another_key() -> None:
    messages = request(9)
    forked = [*messages]
    forked[3] = tool("r1", "deploy/service-1.yaml: replicas: 99")  # page 1 differs
    _, a = archive(messages)
    _, b = archive(forked)
    assert a.pages[0].key != b.pages[0].key and a.pages[0].key.split(":")[0] == b.pages[0].key.split(":")[0] == "1"


def test_state_round_trips_through_json() -> None:
    _, result = archive(request(9))
    stored = Checkpoint.from_json(orjson.loads(orjson.dumps(result.checkpoint.to_json())))
    assert stored == result.checkpoint
    assert decode_entries(stored.state) == list(result.entries)
    assert stored.state["turn"] == 9 and stored.state["pages_through"] == 4
    assert [e.key for e in result.entries] == [p.key for p in result.pages]


def test_a_second_archival_keeps_the_first_entries() -> None:
    _, first = archive(request(9))
    plan, second = archive(request(13), previous=first.checkpoint)
    assert plan.start == first.checkpoint.end
    [block] = second.checkpoint.blocks
    assert (block.start, block.end) == (1, second.checkpoint.end)
    assert [e.page for e in second.entries] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert second.entries[:4] == first.entries  # unchanged: same turn archived, same text
    assert [e.archived_turn for e in second.entries] == [9] * 4 + [13] * 4
    assert [p.page for p in second.pages] == [5, 6, 7, 8]  # only the new pages are to be stored


def test_eviction_runs_with_the_plans_turn() -> None:
    """m = 10: pages archived at turn 9 and never recalled leave at the archival of turn 21;
    page 2, recalled at turn 15, stays (p = 20)."""
    _, first = archive(request(9))
    _, second = archive(request(13), previous=first.checkpoint)
    _, third = archive(request(17), previous=second.checkpoint, stats={2: RecallStat(1, 15)})
    _, fourth = archive(request(21), previous=third.checkpoint, stats={2: RecallStat(1, 15)})
    listed = [e.page for e in fourth.entries if not e.evicted]
    assert [e.page for e in third.entries if not e.evicted] == list(range(1, 13))
    assert listed == [2, *range(5, 17)]
    text = fourth.checkpoint.blocks[0].text
    assert "[Page #1]" not in text and "[Page #2]" in text and "(recalled 1×, last recalled 6 turns ago)" in text
    evicted = [e for e in decode_entries(fourth.checkpoint.state) if e.evicted]
    assert [e.page for e in evicted] == [1, 3, 4] and all(e.summary == "" and not e.lines for e in evicted)


def test_the_contents_page_stays_within_its_budget() -> None:
    options = PagedOptions(contents_max_tokens=300, evict_unrecalled_after=99, evict_idle_after=99)
    previous = None
    for turn in (9, 13, 17, 21):
        _, result = archive(request(turn), previous=previous, options=options)
        previous = result.checkpoint
        assert count(previous.blocks[0].text) <= 300
    assert previous is not None and any(e.evicted for e in decode_entries(previous.state))


def test_another_strategys_checkpoint_is_replaced() -> None:
    messages = request(9)
    foreign = Checkpoint(9, "x", (Block(1, 9, "## Context Summary\n- old", "history"),), 0.0)
    plan, result = archive(messages, previous=foreign)
    assert plan.start == 1 and [e.page for e in result.entries] == [1, 2, 3, 4]
    assert [b.kind for b in result.checkpoint.blocks] == [CONTENTS_KIND]


def test_assembled_request_forwards_the_contents_page_verbatim() -> None:
    messages = request(9)
    _, result = archive(messages)
    forwarded = assemble(messages, 1, result.checkpoint, "assistant_named", KINDS)
    assert forwarded[0] == messages[0] and forwarded[2:] == messages[17:]
    assert forwarded[1]["content"] == result.checkpoint.blocks[0].text == KINDS.render(result.checkpoint.blocks)
    assert not breaks_tool_pairs(messages, forwarded)


def test_bad_input_is_refused() -> None:
    messages = request(9)
    plan, _ = archive(messages)
    chain, lines = PrefixChain.of(messages), [PageLines("s", ())] * 4
    with pytest.raises(ValueError, match="page lines"):
        archive_pages(plan, messages, chain, 1, None, lines[:3], {}, OPTIONS, count, 0.0)
    with pytest.raises(ValueError, match="contiguous"):
        archived_spans(replace(plan, state={**plan.state, "archive": [[1, 1, 5], [3, 9, 17]]}))
    with pytest.raises(ValueError, match="cover"):
        archived_spans(replace(plan, end=13))
    with pytest.raises(ValueError, match="turn"):
        archive_pages(
            replace(plan, state={"archive": plan.state["archive"]}),
            messages,
            chain,
            1,
            None,
            lines,
            {},
            OPTIONS,
            count,
            0.0,
        )


# --- a replay over generated conversations --------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=conversations(max_messages=60, max_turns=20))
def test_replayed_archivals_keep_the_invariants(messages: list[Message]) -> None:
    """A client resending its history: every archival tiles [head, end), indexes every archived
    page exactly once in order, forwards a valid list, and between archivals the forwarded prefix
    is byte-identical."""
    options = PagedOptions(active_pages=2, archive_batch=2, contents_max_tokens=400)
    strategy = PagedStrategy(options)
    current: Checkpoint | None = None
    before: bytes | None = None  # what the previous request forwarded, when no archival since
    for u in user_turns(messages):
        sent = messages[: u + 1]
        head = leading_system_count(sent)
        conv = conversation(sent, tokens=30, window=100_000, optimise="tokens")
        # The raw pages read from the checkpoint's end on are the ones splitting it all gives.
        pages = split_pages(sent, head)
        start = archived_end(conv, current, pages)
        assert unarchived_pages(conv, current) == (start, [p for p in pages if p.start >= start])
        plan = strategy.plan(conv, current, 0.0)
        if plan is not None:
            assert plan.state["turn"] == turn_number(sent)
            spans = plan.state["archive"]
            result = archive_pages(
                plan,
                sent,
                PrefixChain.of(sent),
                head,
                current,
                [extractive_page_lines(sent[s:e]) for _, s, e in spans],
                {},
                options,
                count,
                0.0,
            )
            # Dates read on from the page before, and the index handed on, as reading it all again gives.
            assert [p.when for p in result.pages] == exchange_dates(sent, [e for _, _, e in spans])
            assert result.checkpoint.decoded(archive_index) == archive_index(result.checkpoint.state)
            current = Checkpoint.from_json(orjson.loads(orjson.dumps(result.checkpoint.to_json())))
            [block] = current.blocks
            assert (block.start, block.end) == (head, current.end)
            entries = decode_entries(current.state)
            pages = split_pages(sent, head)
            assert [(e.page, e.start, e.end) for e in entries] == [tuple(p) for p in pages if p.end <= current.end]
            assert count(block.text) <= options.contents_max_tokens
            before = None
        forwarded = assemble(sent, head, current, "assistant_named", KINDS)
        assert not breaks_tool_pairs(sent, forwarded)
        assert forwarded[-1] == sent[-1] and forwarded[:head] == sent[:head]
        now = orjson.dumps(forwarded)
        # Between archivals a request's forwarded list extends the previous one: caches keep hitting.
        assert before is None or now.startswith(before[:-1])
        before = now


# --- eviction at the real archival cadence, with the defaults ---------------------------------


def test_pages_leave_at_the_archivals_the_default_m_and_p_say() -> None:
    """Defaults: 5 active pages, batches of 4, m = 10, p = 20. Archivals happen at turns 9, 13,
    17, ... (4 pages each) and eviction runs only then, so a page leaves at the first archival at
    least m (never recalled) or p (after its last recall) turns later:

    - never recalled, archived at turn a: gone at the archival of a + 12 (the first ≥ a + 10);
    - page 3, recalled at 10: gone at 33 (the first ≥ 30);
    - page 2, recalled at 15: gone at 37 (the first ≥ 35);
    - page 6, recalled at 14 and at 30 (the second recall restarts p): gone at 53 (≥ 50);
    - page 1, recalled at 24 after it left at 21: stays unlisted.
    """
    recalls = {3: [10], 2: [15], 6: [14, 30], 1: [24]}

    def stats_before(turn: int) -> dict[int, RecallStat]:
        """Recalls happen while a turn is answered; an archival opens its turn, so it sees earlier ones."""
        out = {}
        for page, turns in recalls.items():
            seen = [t for t in turns if t < turn]
            if seen:
                out[page] = RecallStat(len(seen), max(seen))
        return out

    previous: Checkpoint | None = None
    shown: list[int] = []
    departures: dict[int, int] = {}
    archived_at: dict[int, int] = {}
    for turn in range(9, 58, 4):
        plan, result = archive(request(turn), previous=previous, stats=stats_before(turn))
        assert plan.state["turn"] == turn and [p.page for p in result.pages] == list(range(turn - 8, turn - 4))
        archived_at.update({p.page: turn for p in result.pages})
        previous = result.checkpoint
        listed = [e.page for e in result.entries if not e.evicted]
        departures.update({page: turn for page in shown if page not in listed})
        shown = listed
        text = previous.blocks[0].text
        assert all(f"[Page #{page}]" in text for page in listed)
        assert not any(f"[Page #{page}]" in text for page in departures)

    special = {3: 33, 2: 37, 6: 53}
    expected = {page: special.get(page, turn + 12) for page, turn in archived_at.items() if turn + 12 <= 57}
    assert departures == expected
    assert departures[1] == departures[4] == 21 and departures[5] == departures[7] == 25  # m, never recalled
    assert 1 not in shown and 6 not in shown and shown == list(range(41, 53))


def test_a_page_shows_the_date_the_conversation_states_for_it() -> None:
    """A date line dates its page and the pages after it, until the next one; the entry keeps the
    date, so the Contents Page renders it the same at every later archival."""
    messages = request(9)
    messages[1] = {**messages[1], "content": "Date: 1:56 pm on 8 May, 2023\n" + messages[1]["content"]}
    messages[9] = {**messages[9], "content": "[25 May 2023]\n" + messages[9]["content"]}
    _, result = archive(messages)
    assert [p.when for p in result.pages] == ["2023-05-08", "2023-05-08", "2023-05-25", "2023-05-25"]
    text = result.checkpoint.blocks[0].text
    assert "[Page #1, 8 May 2023] User: Question 1" in text and "[Page #3, 25 May 2023] User: Question 3" in text
    assert [e.when for e in decode_entries(result.checkpoint.state)] == [p.when for p in result.pages]


def test_a_conversation_stating_no_date_renders_its_pages_as_before() -> None:
    _, result = archive(request(9))
    assert all(p.when is None for p in result.pages)
    assert all(e.when is None for e in decode_entries(result.checkpoint.state))
    assert "[Page #1] User: Question 1" in result.checkpoint.blocks[0].text


def test_a_later_archival_dates_its_pages_on_from_the_page_before_them() -> None:
    """The second archival reads only its own pages' messages: the date stated before them is
    the previous entry's; the result is what reading the whole history gives."""
    messages = request(13)
    messages[1] = {**messages[1], "content": "Date: 1:56 pm on 8 May, 2023\n" + messages[1]["content"]}
    messages[25] = {**messages[25], "content": "[25 May 2023]\n" + messages[25]["content"]}
    _, first = archive(messages[: len(request(9))])
    plan, second = archive(messages, previous=first.checkpoint)
    assert [p.when for p in second.pages] == ["2023-05-08", "2023-05-08", "2023-05-25", "2023-05-25"]
    assert [p.when for p in second.pages] == exchange_dates(messages, [p.end for p in second.pages])
    assert second.checkpoint.decoded(archive_index) == archive_index(second.checkpoint.state)

"""The Contents Page: its state round trip, the three eviction rules step by step, rendering."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import orjson
import pytest

from ctxproxy.strategies.paged import PagedOptions
from ctxproxy.strategies.paged.contents import (
    CONTENTS_HEADER,
    INSTRUCTION,
    MAX_RECALL_STATS,
    RECALL_TOOL,
    SEARCH_TOOL,
    ContentsEntry,
    RecallStat,
    apply_eviction,
    archive_index,
    decode_entries,
    decode_stats,
    encode_entries,
    encode_stats,
    instruction,
    last_use,
    name_tools,
    page_stats,
    record_recall,
    render_contents,
)
from ctxproxy.tokens import TokenCounter

COUNTER = TokenCounter()
LARGE = 100_000  # a Contents Page budget that never binds


def count(text: str) -> int:
    return COUNTER.count_text(text)


def entry(page: int, turn: int, *, lines: int = 2, summary: str | None = None) -> ContentsEntry:
    return ContentsEntry(
        page=page,
        start=page * 3,
        end=page * 3 + 3,
        key=f"{page}:{page:016x}",
        summary=summary or f"User: how do I rotate the key of service {page}?",
        lines=tuple(f"Assistant: step {i} for service {page}." for i in range(1, lines + 1)),
        archived_turn=turn,
    )


def listed(entries: list[ContentsEntry]) -> list[int]:
    return [e.page for e in entries if not e.evicted]


# --- state -----------------------------------------------------------------------------------


def test_entries_round_trip_through_the_checkpoint_state() -> None:
    entries = [entry(2, 5), entry(1, 5).evict(), entry(3, 9, lines=0)]
    state = encode_entries(entries)
    assert decode_entries(state) == sorted(entries, key=lambda e: e.page)


def test_the_state_holds_the_entries_as_one_json_text() -> None:
    """A session's index is read at every request: one string per checkpoint to parse, not an
    object per entry; a state written as a list of entries (before) reads the same."""
    entries = [entry(1, 5).evict(), entry(2, 5), entry(3, 9, lines=0)]
    packed = encode_entries(entries)["contents"]
    assert isinstance(packed, str)
    assert decode_entries({"contents": orjson.loads(packed)}) == decode_entries({"contents": packed}) == entries
    assert decode_entries({"contents": packed[:-1]}) == [] and decode_entries({"contents": "{}"}) == []


def test_evicted_entries_keep_only_where_the_page_is() -> None:
    dated = replace(entry(2, 5), when="2023-05-08")
    [evicted, kept] = orjson.loads(encode_entries([entry(1, 5).evict(), dated])["contents"])
    assert evicted == [1, 3, 6, "1:0000000000000001", 5, None]
    assert kept == [2, 6, 9, "2:0000000000000002", 5, "2023-05-08", dated.summary, list(dated.lines)]


def test_entries_written_as_objects_before_read_the_same() -> None:
    objects = [
        {"page": 1, "start": 3, "end": 6, "key": "1:0000000000000001", "archived_turn": 5, "evicted": True},
        {**{k: v for k, v in vars(entry(2, 5)).items() if k not in ("evicted", "when")}, "lines": ["x"]},
    ]
    assert decode_entries({"contents": objects}) == [entry(1, 5).evict(), replace(entry(2, 5), lines=("x",))]


def test_malformed_state_items_are_skipped() -> None:
    good = orjson.loads(encode_entries([entry(4, 1)])["contents"])[0]
    rows = [good, [5, 1, 2], None, [*good[:6], "summary", "not a list"], [True, *good[1:]], [*good[:5], "8 May"]]
    assert [e.page for e in decode_entries({"contents": orjson.dumps(rows).decode()})] == [4, 4]
    assert decode_entries({"contents": [{"page": "x"}, None, {"page": 5, "lines": "not a list"}]}) == []
    assert decode_entries({}) == [] and decode_entries({"contents": "nope"}) == []


def test_recall_statistics_round_trip_and_record() -> None:
    stats = record_recall(record_recall({}, "3:aa", 7), "3:aa", 9)
    stats = record_recall(stats, "1:aa", 8)
    assert stats == {"3:aa": RecallStat(2, 9), "1:aa": RecallStat(1, 8)}
    stored = encode_stats(stats)
    assert stored == {"3:aa": {"count": 2, "last_turn": 9}, "1:aa": {"count": 1, "last_turn": 8}}
    assert decode_stats(stored) == stats
    assert decode_stats({"x:1": {}, "2:aa": {"count": "1"}, "4:aa": "no"}) == {} and decode_stats(None) == {}
    assert record_recall({"3:aa": RecallStat(2, 9)}, "3:aa", 4)["3:aa"] == RecallStat(3, 9)  # never goes back


def test_the_archive_index_decodes_once_what_each_step_reads() -> None:
    """``archive_index``: the entries as ``decode_entries`` reads them, by page, and the statistics
    of its pages as ``page_stats`` gives them (in page order), from the statistics' side."""
    entries = [entry(4, 5), entry(1, 5).evict(), entry(2, 9, lines=0)]
    index = archive_index(encode_entries(entries))
    assert index.entries == decode_entries(encode_entries(entries))
    assert index.by_page == {e.page: e for e in entries}
    stats = record_recall(record_recall(record_recall({}, entries[0].key, 7), "9:other", 8), entries[1].key, 9)
    expected = page_stats(stats, [(e.page, e.key) for e in index.entries])
    assert index.stats(stats) == expected and list(index.stats(stats)) == list(expected) == [1, 4]
    assert index.stats({}) == {}


def test_recall_statistics_are_per_page_key_not_per_number() -> None:
    """Two conversations sharing a session key both have a page 3, with different keys."""
    stats = record_recall({}, "3:alice", 7)
    assert page_stats(stats, [(3, "3:alice")]) == {3: RecallStat(1, 7)}
    assert page_stats(stats, [(3, "3:bob")]) == {}
    assert decode_stats({"3": {"count": 4, "last_turn": 2}}) == {}  # kept by number alone: nobody's


def test_recall_statistics_keep_the_most_recently_recalled_pages() -> None:
    stats: dict[str, RecallStat] = {}
    for page in range(MAX_RECALL_STATS + 10):
        stats = record_recall(stats, f"{page}:aa", page)
    stats = record_recall(stats, "0:aa", 5000)  # recalled again: the newest
    kept = decode_stats(encode_stats(stats))
    assert len(kept) == MAX_RECALL_STATS and "0:aa" in kept and "1:aa" not in kept and "11:aa" in kept


# --- the m and p rules, turn by turn ---------------------------------------------------------


@dataclass
class Walk:
    """Pages archived and recalled at given turns; eviction runs at the start of each turn (as
    an archival does, before the model answers), so a recall during turn t counts from t + 1."""

    options: PagedOptions
    archived: dict[int, list[int]]  # turn → pages archived then
    recalls: dict[int, list[int]]  # turn → pages recalled during it
    entries: list[ContentsEntry] = field(default_factory=list)
    stats: dict[int, RecallStat] = field(default_factory=dict)

    def turn(self, t: int) -> list[int]:
        self.entries += [entry(p, t) for p in self.archived.get(t, [])]
        self.entries = apply_eviction(self.entries, self.stats, t, self.options, count)
        for page in self.recalls.get(t, []):
            self.stats = record_recall(self.stats, page, t)
        return listed(self.entries)


def test_m_and_p_rules_step_by_step() -> None:
    """m = 3, p = 5. Pages 1-2 archived at turn 1, pages 3-4 at turn 3; page 2 recalled at turn
    2, page 4 at turn 5; page 1 recalled at turn 8, after it was evicted."""
    walk = Walk(
        PagedOptions(evict_unrecalled_after=3, evict_idle_after=5, contents_max_tokens=LARGE),
        archived={1: [1, 2], 3: [3, 4]},
        recalls={2: [2], 5: [4], 8: [1]},
    )
    expected = {
        1: [1, 2],
        2: [1, 2],
        3: [1, 2, 3, 4],
        4: [2, 3, 4],  # m: page 1 never recalled, 4 - 1 ≥ 3
        5: [2, 3, 4],
        6: [2, 4],  # m: page 3 (6 - 3 ≥ 3); page 4 was recalled at 5, so p applies to it
        7: [4],  # p: page 2 last recalled at 2, 7 - 2 ≥ 5
        8: [4],
        9: [4],  # page 1 was recalled at 8 but does not come back
        10: [],  # p: page 4 last recalled at 5
    }
    assert {t: walk.turn(t) for t in range(1, 11)} == expected
    assert [e.page for e in walk.entries] == [1, 2, 3, 4]  # still indexed, only unlisted
    assert all(e.evicted and e.summary == "" and e.lines == () for e in walk.entries)


def test_m_governs_never_recalled_pages_and_p_recalled_ones() -> None:
    """With m > p a never-recalled page still stays m turns: p only measures recalled pages."""
    walk = Walk(
        PagedOptions(evict_unrecalled_after=6, evict_idle_after=2, contents_max_tokens=LARGE),
        archived={1: [1, 2]},
        recalls={1: [2]},
    )
    assert [walk.turn(t) for t in range(1, 8)] == [[1, 2], [1, 2], [1], [1], [1], [1], []]


# --- the budget rule -------------------------------------------------------------------------


def test_last_use_is_the_last_recall_or_the_archival() -> None:
    assert last_use(entry(1, 4), {}) == 4
    assert last_use(entry(1, 4), {1: RecallStat(0, 9)}) == 4
    assert last_use(entry(1, 4), {1: RecallStat(2, 9)}) == 9


def test_budget_evicts_least_recently_used_first_until_under_the_ratio() -> None:
    # last use: page 1 → 9 (recall), 2 → 2 (archival), 3 → 4, 4 → 6, 5 → 8 (3 recalls), 6 → 8 (1 recall)
    entries = [entry(1, 1), entry(2, 2), entry(3, 2), entry(4, 6), entry(5, 3), entry(6, 3)]
    stats = {1: RecallStat(1, 9), 3: RecallStat(1, 4), 5: RecallStat(3, 8), 6: RecallStat(1, 8)}
    order = [2, 3, 4, 6, 5, 1]  # ties (pages 5 and 6 at turn 8): fewer recalls first
    full = count(render_contents(entries, stats))
    options = PagedOptions(contents_max_tokens=full - 1, evict_to_ratio=0.6, evict_unrecalled_after=99)
    out = apply_eviction(entries, stats, 10, options, count)
    gone = [p for p in order if p not in listed(out)]
    assert gone == order[: len(gone)] and gone  # a prefix of the documented order
    assert count(render_contents(out, stats)) <= 0.6 * (full - 1)
    # ... and no more than needed: putting back the last one evicted would be over the target.
    back = [e if e.page != gone[-1] else next(x for x in entries if x.page == gone[-1]) for e in out]
    assert count(render_contents(back, stats)) > 0.6 * (full - 1)


def test_within_budget_nothing_is_evicted_by_size() -> None:
    entries = [entry(p, 1) for p in range(1, 6)]
    full = count(render_contents(entries))
    options = PagedOptions(contents_max_tokens=full, evict_unrecalled_after=99)
    assert listed(apply_eviction(entries, {}, 2, options, count)) == [1, 2, 3, 4, 5]


def test_default_budget_holds_for_a_long_conversation() -> None:
    options = PagedOptions()
    entries = [entry(p, 50, lines=8) for p in range(1, 60)]
    out = apply_eviction(entries, {}, 50, options, count)
    assert count(render_contents(out)) <= 0.8 * 2000
    assert listed(out) == list(range(60 - len(listed(out)), 60))  # same turn: older pages went first


def test_the_rules_run_before_the_budget() -> None:
    """Pages evicted by m free room first: the budget rule only sees what is left."""
    entries = [entry(1, 1), entry(2, 1), entry(3, 9), entry(4, 9)]
    stats = {2: RecallStat(1, 8)}
    room = count(render_contents(entries[1:], stats, 10))  # pages 2-4 fit exactly, all four do not
    options = PagedOptions(contents_max_tokens=room, evict_unrecalled_after=5)
    # m evicts page 1 (never recalled since turn 1) and the rest fits: no budget eviction.
    assert listed(apply_eviction(entries, stats, 10, options, count)) == [2, 3, 4]
    # The budget rule alone, on all four, goes down to 80 % and takes page 2 as well.
    budget_only = options.model_copy(update={"evict_unrecalled_after": 99})
    assert listed(apply_eviction(entries, stats, 10, budget_only, count)) == [3, 4]


# --- rendering -------------------------------------------------------------------------------


def test_render_lists_pages_oldest_first_with_their_lines() -> None:
    """Note 004's statistics, "召回次数: 2, 最后召回: 5轮前" (recalls: 2, last recalled: 5 turns
    ago), on a recalled page's line, counted at the turn the page is rendered for."""
    text = render_contents([entry(7, 3, lines=1), entry(2, 1), entry(5, 2).evict()], {2: RecallStat(2, 3)}, 8)
    lines = text.splitlines()
    assert lines[0] == CONTENTS_HEADER
    assert RECALL_TOOL in text and SEARCH_TOOL in text and "page number" in text
    body = text.split("\n\n", 2)[2]
    assert body == (
        "[Page #2] User: how do I rotate the key of service 2? (recalled 2×, last recalled 5 turns ago)\n"
        "  - Assistant: step 1 for service 2.\n"
        "  - Assistant: step 2 for service 2.\n"
        "[Page #7] User: how do I rotate the key of service 7?\n"
        "  - Assistant: step 1 for service 7."
    )
    assert "#5" not in text  # evicted: not listed


def test_render_is_a_function_of_its_inputs_only() -> None:
    entries = [entry(1, 1), entry(2, 1), entry(3, 4)]
    stats = {2: RecallStat(1, 3)}
    first = render_contents(entries, stats, 9)
    assert render_contents(list(reversed(entries)), dict(stats), 9) == first
    # Only how long ago counts: a later recall rendered as much later reads the same.
    assert render_contents(entries, {2: RecallStat(1, 30)}, 36) == first
    assert "last recalled 6 turns ago" in first
    assert "(recalled 1×, last recalled 1 turn ago)" in render_contents(entries, stats, 4)
    assert "(recalled 1×, last recalled this turn)" in render_contents(entries, stats, 3)
    assert "recalled" not in render_contents(entries, {}, 9).split("\n\n", 2)[2]


def test_render_without_pages_still_says_how_to_search() -> None:
    text = render_contents([entry(1, 1).evict()])
    assert text.startswith(CONTENTS_HEADER) and SEARCH_TOOL in text and "[Page" not in text


def test_tool_names_match_the_proxy_tools() -> None:
    definitions = pytest.importorskip("ctxproxy.tools.definitions")
    assert RECALL_TOOL == definitions.WIRE_PREFIX + definitions.RECALL_PAGE
    assert SEARCH_TOOL == definitions.WIRE_PREFIX + definitions.SEARCH_MEMORY


# --- naming the request's tools --------------------------------------------------------------


def test_the_stored_page_names_the_default_tools() -> None:
    text = render_contents([entry(1, 1)])
    assert text.split("\n\n")[1] == INSTRUCTION == instruction(RECALL_TOOL, SEARCH_TOOL)
    assert name_tools(text, RECALL_TOOL, SEARCH_TOOL) is text  # the usual case: the stored bytes


def test_renamed_tools_are_named_as_the_request_offers_them() -> None:
    text = render_contents([entry(1, 1), entry(2, 1)], {2: RecallStat(1, 3)})
    named = name_tools(text, "ctxproxy_recall_page_", "ctxproxy_search_memory__")
    assert "call the `ctxproxy_recall_page_` tool" in named and "call `ctxproxy_search_memory__`." in named
    assert "`ctxproxy_recall_page`" not in named and "`ctxproxy_search_memory`" not in named
    # Only the instruction changes: header and listing are the stored bytes.
    assert named.split("\n\n")[0] == CONTENTS_HEADER and named.split("\n\n")[2:] == text.split("\n\n")[2:]
    assert name_tools(text, "ctxproxy_recall_page_", "ctxproxy_search_memory__") == named  # deterministic


def test_without_tools_no_tool_is_named() -> None:
    text = render_contents([entry(1, 1)])
    named = name_tools(text, None, None)
    assert "ctxproxy_" not in named and "call" not in named.split("\n\n")[1]
    assert named.split("\n\n")[1] == instruction(None, None)
    assert "[Page #1]" in named


@pytest.mark.parametrize(
    ("recall", "search", "present", "absent"),
    [
        ("r", None, ["`r`"], ["anything no longer listed"]),
        (None, "s", ["`s`"], ["page number"]),
    ],
)
def test_one_tool_only_is_named_alone(
    recall: str | None, search: str | None, present: list[str], absent: list[str]
) -> None:
    line = instruction(recall, search)
    assert all(p in line for p in present) and not any(a in line for a in absent)
    assert line.count("`") == 2


def test_text_that_is_not_a_rendered_contents_page_is_left_alone() -> None:
    other = "## Contents Page\n\nSomething a client wrote about `ctxproxy_recall_page`."
    assert name_tools(other, None, None) == other


def test_one_large_entry_is_shortened_instead_of_taking_the_older_ones_with_it() -> None:
    """An agent's page of many long lines over half the target: older pages stay listed."""
    older = [entry(p, 9) for p in range(1, 4)]
    large = replace(
        entry(4, 9, lines=12), lines=tuple(f"Tool result (grep): src/m{i}.py:{i}: " + "x " * 40 for i in range(12))
    )
    small = count(render_contents(older))
    options = PagedOptions(contents_max_tokens=small * 3, evict_unrecalled_after=99)
    assert count(render_contents([*older, large])) > small * 3  # the large entry alone is over the budget
    out = apply_eviction([*older, large], {}, 10, options, count)
    assert listed(out) == [1, 2, 3, 4] and out[:3] == older  # none evicted, the older entries untouched
    shortened = out[3]
    assert shortened.summary == large.summary and shortened.lines[-1] == large.lines[-1]
    assert shortened.lines[-2].startswith("… ") and shortened.lines[0] == large.lines[0]
    assert count(render_contents(out)) <= 0.8 * small * 3
    # the same inputs give the same page (the archival's bytes never move once sent)
    assert apply_eviction([*older, large], {}, 10, options, count) == out
    # a budget with no room for the large entry's lines keeps its summary alone, still listed
    bare = replace(large, lines=())
    room = count(render_contents([])) + 4 * count(render_contents([bare]).split("\n\n")[-1])
    last = apply_eviction([large], {}, 10, PagedOptions(contents_max_tokens=room, evict_unrecalled_after=99), count)
    assert last == [bare]

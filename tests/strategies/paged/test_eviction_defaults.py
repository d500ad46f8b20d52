"""Contents Page eviction with the shipped defaults: m = ``evict_unrecalled_after`` 10,
p = ``evict_idle_after`` 20, ``contents_max_tokens`` 2000, ``evict_to_ratio`` 0.8.

The rules are evaluated at every turn here (as if every turn archived), so each page's exact
departure turn shows; ``tests/compaction/test_archive.py`` walks the real archival cadence.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ctxproxy.strategies.paged import PagedOptions
from ctxproxy.strategies.paged.contents import (
    ContentsEntry,
    RecallStat,
    apply_eviction,
    last_use,
    record_recall,
    render_contents,
)
from ctxproxy.tokens import TokenCounter

COUNTER = TokenCounter()
DEFAULTS = PagedOptions()


def count(text: str) -> int:
    return COUNTER.count_text(text)


def entry(page: int, turn: int) -> ContentsEntry:
    return ContentsEntry(
        page=page,
        start=page * 2,
        end=page * 2 + 2,
        key=f"{page}:{page:016x}",
        summary=f"User: what is the retention policy of bucket {page:02d}?",
        lines=(f"Assistant: bucket {page:02d} keeps objects for thirty days.",),
        archived_turn=turn,
    )


def listed(entries: list[ContentsEntry]) -> list[int]:
    return [e.page for e in entries if not e.evicted]


@dataclass
class Walk:
    """Eviction at the start of each turn (as an archival does, before the model answers); a
    recall during turn t is counted from turn t + 1."""

    archived: dict[int, list[int]]
    recalls: dict[int, list[int]]
    entries: list[ContentsEntry] = field(default_factory=list)
    stats: dict[int, RecallStat] = field(default_factory=dict)

    def turn(self, t: int) -> list[int]:
        self.entries += [entry(p, t) for p in self.archived.get(t, [])]
        self.entries = apply_eviction(self.entries, self.stats, t, DEFAULTS, count)
        for page in self.recalls.get(t, []):
            self.stats = record_recall(self.stats, page, t)
        return listed(self.entries)

    def departures(self, turns: int) -> dict[int, int]:
        """The turn at which each page stopped being listed."""
        left: dict[int, int] = {}
        shown: list[int] = []
        for t in range(1, turns + 1):
            now = self.turn(t)
            left.update({p: t for p in shown if p not in now})
            shown = now
        return left


def test_defaults_are_the_notes() -> None:
    assert (DEFAULTS.evict_unrecalled_after, DEFAULTS.evict_idle_after) == (10, 20)
    assert (DEFAULTS.contents_budget(None), DEFAULTS.evict_to_ratio) == (2000, 0.8)  # unset: 2000 at most


def test_each_page_leaves_exactly_when_m_or_p_says() -> None:
    """Pages 1-3 archived at turn 1, page 4 at turn 5.

    - page 1, never recalled: listed for 10 turns, gone at 11 (11 - 1 = m);
    - page 2, recalled at 3: gone at 23 (23 - 3 = p);
    - page 3, recalled at 4 and again at 15: the second recall resets p, gone at 35 (not 24);
    - page 4, recalled at 14, one turn before m would take it: p from then on, gone at 34.
    """
    walk = Walk(archived={1: [1, 2, 3], 5: [4]}, recalls={3: [2], 4: [3], 14: [4], 15: [3]})
    snapshots = {t: walk.turn(t) for t in range(1, 37)}
    assert snapshots[1] == [1, 2, 3] and snapshots[5] == [1, 2, 3, 4]
    assert snapshots[10] == [1, 2, 3, 4]  # 9 turns since archival: page 1 still listed
    assert snapshots[11] == [2, 3, 4]  # m
    assert snapshots[15] == [2, 3, 4]  # page 4: m would be due now, but it was recalled at 14
    assert snapshots[22] == [2, 3, 4]
    assert snapshots[23] == [3, 4]  # p: page 2 idle since 3
    assert snapshots[24] == [3, 4]  # page 3 would go now without its recall at 15
    assert snapshots[33] == [3, 4]
    assert snapshots[34] == [3]  # p: page 4 idle since 14
    assert snapshots[35] == []  # p: page 3 idle since 15
    assert snapshots[36] == []
    assert [e.page for e in walk.entries] == [1, 2, 3, 4]  # unlisted, still indexed


def test_departure_turns_with_and_without_a_renewed_recall() -> None:
    renewed = Walk(archived={1: [1, 2, 3], 5: [4]}, recalls={3: [2], 4: [3], 14: [4], 15: [3]})
    assert renewed.departures(40) == {1: 11, 2: 23, 3: 35, 4: 34}
    once = Walk(archived={1: [1, 2, 3], 5: [4]}, recalls={3: [2], 4: [3], 14: [4]})
    assert once.departures(40) == {1: 11, 2: 23, 3: 24, 4: 34}
    never = Walk(archived={1: [1, 2, 3], 5: [4]}, recalls={})
    assert never.departures(40) == {1: 11, 2: 11, 3: 11, 4: 15}


def test_a_recall_after_eviction_does_not_list_the_page_again() -> None:
    walk = Walk(archived={1: [1]}, recalls={12: [1]})
    assert walk.departures(15) == {1: 11}
    assert walk.stats == {1: RecallStat(1, 12)} and listed(walk.entries) == []


# --- the budget rule at its defaults ---------------------------------------------------------


def big_entry(page: int, turn: int) -> ContentsEntry:
    """About 49 tokens on the Contents Page."""
    small = entry(page, turn)
    more = f"User: and after thirty days, where do objects of bucket {page:02d} go?"
    return replace(small, lines=(*small.lines, more))


def lru_order(entries: list[ContentsEntry], stats: dict[int, RecallStat]) -> list[int]:
    """The documented order: last use (recall, else archival), then fewer recalls, then page."""
    recalls = {page: stat.count for page, stat in stats.items()}
    return [e.page for e in sorted(entries, key=lambda e: (last_use(e, stats), recalls.get(e.page, 0), e.page))]


def test_budget_evicts_least_recently_recalled_first_until_under_80_percent() -> None:
    """48 pages archived in batches of 12 at turns 5, 7, 9 and 11, about 2,390 tokens in all,
    evaluated at turn 14 with the defaults (m and p are not due for any page). Pages 3, 7 and 14
    are old but were recalled; the budget rule keeps them and evicts newer pages nobody recalled,
    least recently used first, and stops at the first point at or under 1,600 tokens."""
    entries = [big_entry(p, 5 + 2 * ((p - 1) // 12)) for p in range(1, 49)]
    stats = {
        3: RecallStat(1, 12),
        7: RecallStat(2, 8),
        14: RecallStat(1, 8),  # same last use as page 7, fewer recalls: would go before it
        30: RecallStat(4, 13),
        44: RecallStat(1, 10),  # archived at 11, recalled at 10 (found by search): archival counts
    }
    assert count(render_contents(entries, stats, 14)) > 2000
    out = apply_eviction(entries, stats, 14, DEFAULTS, count)

    kept = listed(out)
    assert kept == [3, 7, 14, *range(22, 49)]
    order = lru_order(entries, stats)
    gone = [p for p in order if p not in kept]
    assert gone == [1, 2, 4, 5, 6, 8, 9, 10, 11, 12, 13, 15, 16, 17, 18, 19, 20, 21] == order[: len(gone)]
    assert order.index(14) < order.index(7)
    assert count(render_contents(out, stats, 14)) <= 0.8 * 2000
    # Not one page more than needed: with the last one evicted back it is over 1,600.
    back = [entries[p - 1] if p == gone[-1] else e for p, e in zip(range(1, 49), out, strict=True)]
    assert count(render_contents(back, stats, 14)) > 0.8 * 2000
    assert all(e.evicted == (e.page in gone) for e in out) and [e.page for e in out] == list(range(1, 49))


def test_between_80_percent_and_the_budget_nothing_is_evicted_by_size() -> None:
    """The rule starts at 2,000 tokens; 80 % is where it stops, not where it starts."""
    entries = [big_entry(p, 5) for p in range(1, 37)]
    assert 1600 < count(render_contents(entries)) <= 2000
    assert listed(apply_eviction(entries, {}, 14, DEFAULTS, count)) == list(range(1, 37))

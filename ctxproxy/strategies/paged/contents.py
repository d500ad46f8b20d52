"""The archive index of a ``paged`` conversation and the Contents Page the model sees. Pure.

Every archived page has a ``ContentsEntry``: where it was (``start``/``end`` in the request), the
Store key suffix of its raw messages, a one-line summary, one line per entry and the turn it was
archived. The entries live in the checkpoint's JSON ``state`` (``entries``: ``encode_entries``/``decode_entries``);
recall statistics (``RecallStat``, one per page) live in their own Store value, because they
change on every recall while the checkpoint does not. They are kept by the page's key — its
number *and* the prefix hash of the conversation through it — not by its number alone: two
conversations that share a session key (strangers who opened with the same system prompt and
"Hi", or a fork) each count their own page 3's recalls, and one's recalls never show in, or
keep alive, the other's Contents Page. ``page_stats`` gives the statistics of a set of entries
by page number, which is what eviction and rendering read.

Eviction (``apply_eviction``) takes entries off the Contents Page — never out of the index: an
evicted entry keeps its key (the raw page stays recallable) and only drops its text, and the page
stays findable through memory search. Eviction runs when pages are archived, never in between:
the page's text is part of the prompt prefix, and which pages it lists stays the same from one
archival to the next. The rules, in this order, for the turn ``t``:

1. **m** (``evict_unrecalled_after``): a page never recalled, archived at turn ``a``, leaves once
   ``t − a ≥ m``.
2. **p** (``evict_idle_after``): a page recalled at least once, last at turn ``l``, leaves once
   ``t − l ≥ p``. (m governs never-recalled pages and p recalled ones, so neither rule makes
   the other moot, whatever their values.)
3. **budget**: if the rendered page exceeds ``contents_max_tokens``, an entry larger than
   ``ENTRY_SHARE`` of the target below is shortened first (its first lines, how many were left
   out and its last line; then its summary alone, clipped), so that one large page does not
   take every older entry with it; then entries leave least recently
   *used* first until it is at most ``evict_to_ratio`` of it. A page's last use is its last
   recall, or its archival when never recalled — archiving counts as the first use, as a cache
   fill does — so a page archived long ago and never recalled goes before one just archived or
   recently recalled. Ties: fewer recalls first, then the older page.

Evicted entries never come back: a later recall (the model found the page through search)
updates its statistics but does not list it again.

**The statistics it shows** (the note's "召回次数: 2, 最后召回: 5轮前"): a recalled page's entry
ends ``(recalled 2×, last recalled 5 turns ago)``, counted at a given turn (``render_contents``'
``turn``). The archival renders it for its own turn; a request forwards it re-rendered for the
turn its statistics last changed in a way the model should see (``restore.stats_turn``), not for
its own turn — a count that moved every turn would rewrite the page, and miss the provider's
prompt cache for everything after it, on every turn.

**The tools it names.** The page is rendered with the instruction for the default tool names
(``INSTRUCTION``), at its archival (and stored so in the checkpoint) as when a request shows it. A request may not have
those tools — the client defined a tool of the same name and ours were renamed
(``ctxproxy_recall_page_``), or none are offered (``n`` > 1, a forced or ``required``
``tool_choice``, legacy ``functions``, ``[tools] enabled = false``) — so when the page is
forwarded, ``name_tools`` swaps that one sentence for ``instruction(recall, search)``, naming
only the tools the request really carries. The swap depends only on the request's tool names,
so a client that always sends the same tools gets the same bytes between archivals, and a
request with the default tools gets the stored text untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, TypeVar

from ctxproxy.strategies.paged.base import PagedOptions
from ctxproxy.strategies.paged.entries import (
    ArchiveIndex,
    ContentsEntry,
    RecallStat,
    archive_index,
    as_int,
    decode_entries,
    encode_entries,
)
from ctxproxy.strategies.paged.lines import cap_lines, clip_line
from ctxproxy.vocabulary import RECALL_PAGE, SEARCH_MEMORY, WIRE_PREFIX

__all__ = [
    "CONTENTS_HEADER",
    "ArchiveIndex",
    "archive_index",
    "RECALL_TOOL",
    "SEARCH_TOOL",
    "ContentsEntry",
    "RecallStat",
    "apply_eviction",
    "decode_stats",
    "decode_entries",
    "encode_stats",
    "encode_entries",
    "instruction",
    "name_tools",
    "page_stats",
    "record_recall",
    "render_contents",
    "turns_ago",
]

CONTENTS_HEADER = "## Contents Page"
# The proxy-side tools' wire names when no client tool has them.
RECALL_TOOL = WIRE_PREFIX + RECALL_PAGE
SEARCH_TOOL = WIRE_PREFIX + SEARCH_MEMORY
MAX_RECALL_STATS: Final = 1024  # pages with statistics per session; the least recently recalled go first
ENTRY_SHARE: Final = 0.5  # of the budget rule's target: the most one entry may take (a larger one is shortened)
MIN_SUMMARY_CHARS: Final = 24
K = TypeVar("K", int, str)


def instruction(recall: str | None, search: str | None) -> str:
    """The Contents Page's second paragraph: how to read archived pages with the tools the
    request offers under these names (None: not offered), and never a tool it does not offer."""
    archived = "Earlier pages of this conversation are archived"
    if recall is not None and search is not None:
        return (
            f"{archived}. To read a page below in full, call the `{recall}` tool with its page number; "
            f"for anything no longer listed, call `{search}`."
        )
    if recall is not None:
        return f"{archived}. To read a page below in full, call the `{recall}` tool with its page number."
    if search is not None:
        return f"{archived} and summarised below; to find what one of them said, call `{search}`."
    return f"{archived} and summarised below; their full text is not available here."


INSTRUCTION = instruction(RECALL_TOOL, SEARCH_TOOL)  # what the stored Contents Page says
_STORED_OPENING = f"{CONTENTS_HEADER}\n\n{INSTRUCTION}"


# --- recall statistics -----------------------------------------------------------------------


def decode_stats(value: Any) -> dict[str, RecallStat]:
    """The Store value ``{"<page key>": {"count": n, "last_turn": t}}``, least recently recalled
    first; anything malformed is skipped, and so are statistics kept by page number alone (as
    before pages were told apart by their prefix: they may be another conversation's)."""
    if not isinstance(value, Mapping):
        return {}
    stats: dict[str, RecallStat] = {}
    for key, stat in value.items():
        if not isinstance(key, str) or ":" not in key or not isinstance(stat, Mapping):
            continue
        count, last = as_int(stat.get("count")), as_int(stat.get("last_turn"))
        if count is not None and last is not None:
            stats[key] = RecallStat(count, last)
    return stats


def encode_stats(stats: Mapping[str, RecallStat]) -> dict[str, dict[str, int]]:
    """The Store value of ``stats`` (by page key, least recently recalled first): the newest
    ``MAX_RECALL_STATS`` of them."""
    kept = list(stats.items())[-MAX_RECALL_STATS:]
    return {key: {"count": s.count, "last_turn": s.last_turn} for key, s in kept}


def record_recall(stats: Mapping[K, RecallStat], page: K, turn: int) -> dict[K, RecallStat]:
    """The statistics after ``page`` (its key, or its number) was recalled during ``turn``; it
    moves to the end (the most recently recalled)."""
    previous = stats.get(page)
    count = previous.count + 1 if previous is not None else 1
    last = max(turn, previous.last_turn) if previous is not None else turn
    out = {key: stat for key, stat in stats.items() if key != page}
    out[page] = RecallStat(count, last)
    return out


def page_stats(stats: Mapping[str, RecallStat], pages: Iterable[tuple[int, str]]) -> dict[int, RecallStat]:
    """The statistics of the ``(page number, page key)`` pages, by number (a page never recalled has none)."""
    return {page: stats[key] for page, key in pages if key in stats}


# --- eviction --------------------------------------------------------------------------------


def last_use(entry: ContentsEntry, stats: Mapping[int, RecallStat]) -> int:
    """The turn a page was last used: its last recall, or its archival when never recalled."""
    stat = stats.get(entry.page)
    if stat is None or stat.count == 0:
        return entry.archived_turn
    return max(stat.last_turn, entry.archived_turn)


def _recalled(entry: ContentsEntry, stats: Mapping[int, RecallStat]) -> bool:
    stat = stats.get(entry.page)
    return stat is not None and stat.count > 0


def _by_rules(entry: ContentsEntry, stats: Mapping[int, RecallStat], turn: int, options: PagedOptions) -> ContentsEntry:
    if entry.evicted:
        return entry
    if not _recalled(entry, stats):
        return entry.evict() if turn - entry.archived_turn >= options.evict_unrecalled_after else entry
    return entry.evict() if turn - last_use(entry, stats) >= options.evict_idle_after else entry


def apply_eviction(
    entries: Sequence[ContentsEntry],
    stats: Mapping[int, RecallStat],
    turn: int,
    options: PagedOptions,
    count_tokens: Callable[[str], int],
    max_tokens: int | None = None,
) -> list[ContentsEntry]:
    """``entries`` (by page) after the m and p rules, then the budget rule (module docstring);
    ``max_tokens``: the budget in this request (default: ``options.contents_budget(None)``)."""
    limit = max_tokens if max_tokens is not None else options.contents_budget(None)
    out = sorted((_by_rules(e, stats, turn, options) for e in entries), key=lambda e: e.page)
    tokens = count_tokens(render_contents(out, stats, turn))
    if tokens <= limit:
        return out
    target = options.evict_to_ratio * limit
    out = [_shortened(e, stats, turn, int(ENTRY_SHARE * target), count_tokens) for e in out]
    tokens = count_tokens(render_contents(out, stats, turn))
    listed = [e for e in out if not e.evicted]
    victims = sorted(listed, key=lambda e: (last_use(e, stats), _count(e, stats), e.page))
    evicted: set[int] = set()
    for victim in victims:
        if tokens <= target:
            break
        evicted.add(victim.page)
        # Each entry's own text is (almost exactly) what its removal saves; the estimate is
        # checked against the real count before stopping.
        tokens -= count_tokens(_render_entry(victim, stats, turn) + "\n")
        if tokens <= target:
            tokens = count_tokens(render_contents([e for e in out if e.page not in evicted], stats, turn))
    return [e.evict() if e.page in evicted else e for e in out]


def _shortened(
    entry: ContentsEntry, stats: Mapping[int, RecallStat], turn: int, limit: int, count_tokens: Callable[[str], int]
) -> ContentsEntry:
    """``entry`` within ``limit`` tokens: fewer lines (the first ones, how many were left out, the
    last one), then none, then a shorter summary; as it was when it fits."""

    def fits(candidate: ContentsEntry) -> bool:
        return count_tokens(_render_entry(candidate, stats, turn)) <= limit

    if entry.evicted or fits(entry):
        return entry
    for keep in range(len(entry.lines) - 1, 1, -1):
        if fits(shorter := replace(entry, lines=cap_lines(entry.lines, keep))):
            return shorter
    shorter = replace(entry, lines=())
    size = len(entry.summary)
    while not fits(shorter) and size > MIN_SUMMARY_CHARS:
        size = max(MIN_SUMMARY_CHARS, size * 2 // 3)
        shorter = replace(entry, lines=(), summary=clip_line(entry.summary, size))
    return shorter


def _count(entry: ContentsEntry, stats: Mapping[int, RecallStat]) -> int:
    stat = stats.get(entry.page)
    return stat.count if stat is not None else 0


# --- rendering -------------------------------------------------------------------------------


def turns_ago(turns: int) -> str:
    """``turns`` before now, in words: "this turn", "1 turn ago", "5 turns ago"."""
    if turns <= 0:
        return "this turn"
    return "1 turn ago" if turns == 1 else f"{turns} turns ago"


def _render_entry(entry: ContentsEntry, stats: Mapping[int, RecallStat], turn: int) -> str:
    stat = stats.get(entry.page)
    recalled = ""
    if stat is not None and stat.count > 0:
        recalled = f" (recalled {stat.count}×, last recalled {turns_ago(turn - stat.last_turn)})"
    head = f"[{entry.title}] {entry.summary}".rstrip() + recalled
    return "\n".join([head, *(f"  - {line}" for line in entry.lines)])


def render_contents(
    entries: Iterable[ContentsEntry], stats: Mapping[int, RecallStat] | None = None, turn: int = 0
) -> str:
    """The Contents Page: a header, how to recall, then every listed page, oldest first, a
    recalled one with its statistics as of ``turn`` (module docstring).

    A function of its inputs only — no clock — so the same entries, statistics and turn give
    the same bytes: the prompt prefix stays byte-identical while they do not change.
    """
    stats = stats or {}
    listed = sorted((e for e in entries if not e.evicted), key=lambda e: e.page)
    parts = [CONTENTS_HEADER, INSTRUCTION]
    if listed:
        parts.append("\n".join(_render_entry(e, stats, turn) for e in listed))
    return "\n\n".join(parts)


def name_tools(text: str, recall: str | None, search: str | None) -> str:
    """A rendered Contents Page whose instruction names ``recall`` / ``search`` (the request's wire
    names, None when not offered) instead of the defaults. Deterministic; the stored text itself
    when the names are the defaults, or when ``text`` is not a Contents Page as rendered here."""
    if not text.startswith(_STORED_OPENING) or (recall, search) == (RECALL_TOOL, SEARCH_TOOL):
        return text
    return f"{CONTENTS_HEADER}\n\n{instruction(recall, search)}{text[len(_STORED_OPENING) :]}"

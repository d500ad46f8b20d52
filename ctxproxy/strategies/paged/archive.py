"""Executing a ``paged`` plan: index the archived pages and render the new Contents Page. Pure.

``archive_pages`` turns the plan's ``state["archive"]`` (``[[page, start, end], ...]``) and one
``PageLines`` per archived page into:

- the new checkpoint: ONE ``"contents"`` block covering ``[head, plan.end)`` whose text is the
  rendered Contents Page (blocks must tile ``[head, end)``; the raw pages are gone from the
  prompt, the Contents Page stands for all of them), and ``state`` = the archive index
  (``contents.encode_entries``) plus ``turn`` (the turn of this archival) and
  ``pages_through`` (the newest archived page);
- the archived pages themselves (``ArchivedPage``), for the caller to store raw under
  ``ctxproxy.store.keys.archived_page_key(session, page.key)`` and to index for memory search.

Each page and its entry carry the date its exchange happened when the conversation states one
(the last date line of the request's messages through the page, ``dates.exchange_dates``): the
entry shows it (``[Page #12, 8 May 2023]``), the page's memory documents keep it.

The previous checkpoint's entries are kept when it is a paged one and they lie before the new
range; a page archived again (the previous checkpoint was another strategy's, or did not end on
a page boundary) gets a fresh entry. Eviction (``apply_eviction``) runs here, with the plan's
turn, because this is the only time the Contents Page is rendered. No Store, no clock: the caller
passes ``now`` and does the I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxproxy.session import PrefixChain
from ctxproxy.strategies.base import Block, Checkpoint, Message, Plan
from ctxproxy.strategies.dates import exchange_dates
from ctxproxy.strategies.paged.base import CONTENTS_KIND, PagedOptions, is_paged_checkpoint
from ctxproxy.strategies.paged.contents import apply_eviction, render_contents
from ctxproxy.strategies.paged.entries import ContentsEntry, RecallStat, archive_index, encode_entries, index_of
from ctxproxy.strategies.paged.lines import PageLines, cap_lines, clip_line

__all__ = ["ArchiveResult", "ArchivedPage", "archive_pages", "archived_spans", "listable_pages", "page_key_suffix"]


@dataclass(frozen=True)
class ArchivedPage:
    """Page ``page`` = ``messages[start:end]``, to be stored raw under the suffix ``key``."""

    page: int
    start: int
    end: int
    key: str
    messages: tuple[Message, ...]
    when: str | None = None  # the exchange's date as the conversation states it (ISO; ``dates.exchange_dates``)


@dataclass(frozen=True)
class ArchiveResult:
    checkpoint: Checkpoint
    pages: tuple[ArchivedPage, ...]
    entries: tuple[ContentsEntry, ...]  # the whole index after this archival, by page


def page_key_suffix(chain: PrefixChain, page: int, end: int) -> str:
    """``<page>:<16 hex of the prefix hash up to the page's end>``: a fork's page of the same
    number (same page, different content) gets a different key."""
    return f"{page}:{chain.prefix_hash(end).hex()[:16]}"


def archived_spans(plan: Plan) -> list[tuple[int, int, int]]:
    """``(page, start, end)`` of each page the plan archives; ValueError when malformed."""
    raw = plan.state.get("archive")
    if not isinstance(raw, list | tuple) or not raw:
        raise ValueError("a paged plan needs state['archive'] = [[page, start, end], ...]")
    spans = []
    for item in raw:
        if not isinstance(item, list | tuple) or len(item) != 3 or not all(isinstance(v, int) for v in item):
            raise ValueError(f"malformed archive item {item!r}")
        spans.append((int(item[0]), int(item[1]), int(item[2])))
    if spans[0][1] != plan.start or spans[-1][2] != plan.end:
        raise ValueError("the archived pages must cover [plan.start, plan.end)")
    if any(a[2] != b[1] for a, b in zip(spans, spans[1:], strict=False)):
        raise ValueError("the archived pages must be contiguous")
    return spans


def listable_pages(plan: Plan, chain: PrefixChain, previous: Checkpoint | None) -> list[tuple[int, str]]:
    """``(page, key)`` of every page the plan's Contents Page may list: the previous paged
    checkpoint's and the ones it archives (whose recall statistics its eviction reads)."""
    return [(e.page, e.key) for e in _entries(previous)] + [
        (page, page_key_suffix(chain, page, end)) for page, _, end in archived_spans(plan)
    ]


def _entries(previous: Checkpoint | None) -> list[ContentsEntry]:
    """The entries of the previous checkpoint when it is a paged one (decoded once per checkpoint)."""
    return previous.decoded(archive_index).entries if previous is not None and is_paged_checkpoint(previous) else []


def _contents_limit(plan: Plan) -> int | None:
    """The Contents Page's budget the plan computed for its request's window (None: the options')."""
    limit = plan.state.get("contents_max_tokens")
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None


def _archived(
    spans: Sequence[tuple[int, int, int]],
    messages: Sequence[Message],
    chain: PrefixChain,
    before: Sequence[ContentsEntry],
) -> tuple[ArchivedPage, ...]:
    """The pages of ``spans``, each with the date the conversation states through it: read from
    the pages' own messages on from the date through the page before them when ``before`` (the
    previous index) ends there — what reading the whole history again would give — else from the
    start of the history."""
    start = spans[0][1]
    through = next((e for e in reversed(before) if e.end == start), None)
    if through is None:
        stated = exchange_dates(messages, [end for _, _, end in spans])
    else:
        own = exchange_dates(messages[start:], [end - start for _, _, end in spans])
        stated = [when if when is not None else through.when for when in own]
    return tuple(
        ArchivedPage(page, start, end, page_key_suffix(chain, page, end), tuple(messages[start:end]), when)
        for (page, start, end), when in zip(spans, stated, strict=True)
    )


def archive_pages(
    plan: Plan,
    messages: Sequence[Message],
    chain: PrefixChain,
    head: int,
    previous: Checkpoint | None,
    lines: Sequence[PageLines],
    stats: Mapping[int, RecallStat],
    options: PagedOptions,
    count_tokens: Callable[[str], int],
    now: float,
    *,
    summarizer: str = "extractive",
) -> ArchiveResult:
    """The checkpoint after archiving the plan's pages, and the pages to store (module docstring).

    ``lines``: one ``PageLines`` per archived page, in order. ``summarizer``: what wrote them
    (``"llm"`` or ``"extractive"``), recorded on the checkpoint.
    """
    spans = archived_spans(plan)
    if len(lines) != len(spans):
        raise ValueError(f"{len(spans)} pages archived but {len(lines)} page lines given")
    turn = plan.state.get("turn")
    if not isinstance(turn, int) or isinstance(turn, bool):
        raise ValueError("a paged plan needs state['turn']")
    previous_entries = _entries(previous)
    pages = _archived(spans, messages, chain, previous_entries)
    new = [
        ContentsEntry(
            p.page,
            p.start,
            p.end,
            p.key,
            clip_line(text.summary),
            cap_lines([clip_line(line) for line in text.lines]),
            turn,
            when=p.when,
        )
        for p, text in zip(pages, lines, strict=True)
    ]
    archived_now = {p.page for p in pages}
    kept = [e for e in previous_entries if e.end <= plan.start and e.page not in archived_now]
    entries = apply_eviction([*kept, *new], stats, turn, options, count_tokens, _contents_limit(plan))
    text = render_contents(entries, stats, turn)
    state: dict[str, Any] = {**encode_entries(entries), "turn": turn, "pages_through": pages[-1].page}
    checkpoint = Checkpoint(
        end=plan.end,
        prefix_hash=chain.prefix_hash(plan.end).hex(),
        blocks=(Block(head, plan.end, text, CONTENTS_KIND),),
        created_at=now,
        summarizer=summarizer,
        state=state,
    )
    checkpoint.known_as(archive_index, index_of(entries))  # the next requests read it: not decoded again
    return ArchiveResult(checkpoint, pages, tuple(entries))

"""A ``paged`` checkpoint's archive index: one ``ContentsEntry`` per archived page, as its
``state`` holds them and as the steps of a request read them (``ArchiveIndex``). Pure.

The entries are held in the state as one JSON text, a string of rows (``encode_entries``): a
session's index keeps several checkpoints, each with every entry, and is read from the Store at
every request, so reading it parses one string per checkpoint instead of building ~10,000
objects for each at ~3,000 messages (and a full garbage collection has none of them to walk),
and rows without field names make it less than half as long. They are decoded once per
checkpoint (``Checkpoint.decoded(archive_index)``). A state written before, a list of entries
as objects, still reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson

from ctxproxy.strategies.dates import format_day, iso_day

STATE_KEY = "contents"


@dataclass(frozen=True)
class ContentsEntry:
    """One archived page: ``messages[start:end]`` of the request, stored under ``key``."""

    page: int
    start: int
    end: int
    key: str  # the raw page's Store key suffix: "<page>:<prefix hash of end, 16 hex>"
    summary: str  # one line for the page
    lines: tuple[str, ...]  # one line per entry
    archived_turn: int
    evicted: bool = False
    when: str | None = None  # the exchange's stated date (ISO), shown after the page number

    def evict(self) -> ContentsEntry:
        """Off the Contents Page: the text goes, the location and key stay."""
        return replace(self, summary="", lines=(), evicted=True)

    @property
    def title(self) -> str:
        """``Page #12``, or ``Page #12, 8 May 2023`` when its date is known."""
        return f"Page #{self.page}" if self.when is None else f"Page #{self.page}, {format_day(self.when)}"


@dataclass(frozen=True)
class RecallStat:
    count: int
    last_turn: int


# An entry's row in the state: these fields, then, unless it is evicted, its summary and lines.
_ROW = ("page", "start", "end", "key", "archived_turn", "when")


def _entry_row(entry: ContentsEntry) -> list[Any]:
    row: list[Any] = [entry.page, entry.start, entry.end, entry.key, entry.archived_turn, entry.when]
    return row if entry.evicted else [*row, entry.summary, list(entry.lines)]


def encode_entries(entries: Iterable[ContentsEntry]) -> dict[str, Any]:
    """The checkpoint ``state`` part of the index: the entries' rows (``_ROW``) as one JSON text
    (module docstring); evicted entries keep only where the page is."""
    rows = [_entry_row(e) for e in sorted(entries, key=lambda e: e.page)]
    return {STATE_KEY: orjson.dumps(rows).decode()}


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _fields(data: Any) -> Mapping[str, Any] | None:
    """An entry's fields by name: from its row, or its object as a state written before held it."""
    if isinstance(data, list) and len(data) in (len(_ROW), len(_ROW) + 2):
        fields = dict(zip(_ROW, data, strict=False))
        if len(data) == len(_ROW):
            fields["evicted"] = True
        else:
            fields["summary"], fields["lines"] = data[len(_ROW) :]
        return fields
    return data if isinstance(data, Mapping) else None


def _entry(item: Any) -> ContentsEntry | None:
    data = _fields(item)
    if data is None:
        return None
    page, start, end, turn = (as_int(data.get(k)) for k in ("page", "start", "end", "archived_turn"))
    key, when = data.get("key"), data.get("when")
    if page is None or start is None or end is None or turn is None or not isinstance(key, str):
        return None
    when = when if isinstance(when, str) and iso_day(when) is not None else None
    if data.get("evicted") is True:
        return ContentsEntry(page, start, end, key, "", (), turn, evicted=True, when=when)
    summary = data.get("summary")
    lines = data.get("lines")
    if not isinstance(summary, str) or not isinstance(lines, list):
        return None
    return ContentsEntry(page, start, end, key, summary, tuple(str(line) for line in lines), turn, when=when)


def decode_entries(state: Mapping[str, Any]) -> list[ContentsEntry]:
    """The entries of a checkpoint's state, by page; malformed items are skipped, not fatal."""
    raw = state.get(STATE_KEY)
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return []
    if not isinstance(raw, list):
        return []
    entries = [e for e in (_entry(item) for item in raw) if e is not None]
    return sorted(entries, key=lambda e: e.page)


@dataclass(frozen=True)
class ArchiveIndex:
    """A checkpoint's entries decoded once (``Checkpoint.decoded(archive_index)``: its steps and
    the next requests that read the same checkpoint share them), by page, and the pages of each
    key. Read only."""

    entries: list[ContentsEntry]
    by_page: dict[int, ContentsEntry]
    by_key: dict[str, list[int]]

    def stats(self, stats: Mapping[str, RecallStat]) -> dict[int, RecallStat]:
        """``page_stats`` of the entries, looked up from the (few) statistics' side."""
        found = {page: stat for key, stat in stats.items() for page in self.by_key.get(key, ())}
        return dict(sorted(found.items()))


def index_of(entries: list[ContentsEntry]) -> ArchiveIndex:
    """The index of ``entries`` (by page), as ``archive_index`` reads it from their encoding."""
    by_key: dict[str, list[int]] = {}
    for entry in entries:
        by_key.setdefault(entry.key, []).append(entry.page)
    return ArchiveIndex(entries, {e.page: e for e in entries}, by_key)


def archive_index(state: Mapping[str, Any]) -> ArchiveIndex:
    return index_of(decode_entries(state))

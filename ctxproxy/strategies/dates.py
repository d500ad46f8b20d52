"""Dates a conversation states, and when an exchange happened. Pure: no clock.

A **date line** is a line of a message that says only a date, as a chat log or a client puts
one at the start of a session: ``Date: 1:56 pm on 8 May, 2023``, ``[8 May 2023]``,
``Session date: 2023-05-08``, ``Today is May 8, 2023.``, Claude Code's ``Today's date is
2025-11-27.`` (a time of day may come before or after the date). A date in the middle of a
sentence ("born on 3 March 1990") is no date line: it does not say when the exchange happened.

``exchange_dates``: for each given end, the date of the last date line in ``messages[:end]``
(tool results left out: a log's or a ``date`` command's line is no date of the conversation) —
the date of the exchange that ends there, as the conversation itself states it (None when it
states none). One pass over the messages, however many ends.

``parse_date`` reads the date expressions (day month year, month day year, ISO); ``format_day``
writes a date as it is shown ("8 May 2023"). Dates travel as ISO strings (``2023-05-08``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any, Final

from ctxproxy.vocabulary import RESULT_ROLES

__all__ = [
    "DATE",
    "MONTH",
    "MONTHS",
    "date_in",
    "exchange_dates",
    "format_day",
    "iso_day",
    "parse_date",
    "stated_date",
    "without_date_lines",
]

MONTHS: Final = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH_NAMES: Final = tuple(next(n for n, m in MONTHS.items() if m == month).capitalize() for month in range(1, 13))
MONTH: Final = "(?:" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_ORDINAL: Final = r"(?:st|nd|rd|th)?"
_DMY: Final = rf"(?P<d1>\d{{1,2}}){_ORDINAL}\s*(?:of\s+)?(?P<m1>{MONTH}),?\s*(?P<y1>\d{{4}})"
_MDY: Final = rf"(?P<m2>{MONTH})\s*(?P<d2>\d{{1,2}}){_ORDINAL},?\s*(?P<y2>\d{{4}})"
_ISO: Final = r"(?P<y3>\d{4})-(?P<m3>\d{2})-(?P<d3>\d{2})"
DATE: Final = rf"(?:{_DMY}|{_MDY}|{_ISO})"
_DATE_RE: Final = re.compile(rf"(?<![\w-]){DATE}(?![\w-])", re.IGNORECASE)
_TIME: Final = r"\d{1,2}(?::\d{2}\s*(?:[ap]\.?m\.?)?|\s*[ap]\.?m\.?)"  # 13:05, 1:56 pm, 2 pm
_LABEL: Final = (
    r"(?:(?:session\s+)?date(?:\s+and\s+time)?|time|today\s+is|today['’]s\s+date(?:\s+is)?|current\s+date(?:\s+is)?)"
)
_LINE: Final = re.compile(
    rf"^\s*[\[(]?\s*(?:{_LABEL}\s*[:\-–]?\s*)?(?:{_TIME}\s*(?:on|,)?\s*)?"
    rf"(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day,?\s*)?{DATE}(?:,?\s*(?:at\s+)?{_TIME})?\s*[\])]?\s*\.?\s*$",
    re.IGNORECASE,
)
_CUE: Final = re.compile(r"\d{4}")  # every date form carries a year: a cheap test before the line pattern


def _day(match: re.Match[str]) -> date | None:
    for d, m, y in (("d1", "m1", "y1"), ("d2", "m2", "y2"), ("d3", "m3", "y3")):
        if match.group(y) is None:
            continue
        month_text = match.group(m).lower().rstrip(".")
        month = int(month_text) if month_text.isdigit() else MONTHS.get(month_text)
        try:
            return date(int(match.group(y)), month or 0, int(match.group(d)))
        except ValueError:
            return None
    return None


def parse_date(text: str) -> date | None:
    """The first date expression in ``text`` (a real calendar day), else None."""
    for match in _DATE_RE.finditer(text):
        found = _day(match)
        if found is not None:
            return found
    return None


def date_in(text: str) -> list[tuple[date, int, int]]:
    """Every date expression of ``text``: ``(day, start, end)``."""
    out = []
    for match in _DATE_RE.finditer(text):
        found = _day(match)
        if found is not None:
            out.append((found, match.start(), match.end()))
    return out


def stated_date(text: str) -> date | None:
    """The date of the last date line of ``text`` (module docstring), else None."""
    if not _CUE.search(text):
        return None
    found = None
    for line in text.splitlines():
        if _CUE.search(line) and (match := _LINE.match(line)) is not None:
            found = _day(match) or found
    return found


def without_date_lines(text: str) -> str:
    """``text`` without its date lines."""
    if not _CUE.search(text):
        return text
    return "\n".join(line for line in text.splitlines() if not (_CUE.search(line) and _LINE.match(line)))


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def exchange_dates(messages: Sequence[Mapping[str, Any]], ends: Sequence[int]) -> list[str | None]:
    """For each of ``ends``, the ISO date of the last date line in ``messages[:end]`` (None: none)."""
    last = max(ends, default=0)
    dated: list[str | None] = []  # dated[i]: the date stated through messages[:i + 1]
    current: str | None = None
    for message in messages[:last]:
        said = isinstance(message, Mapping) and message.get("role") not in RESULT_ROLES
        found = stated_date(_text(message)) if said else None
        current = found.isoformat() if found is not None else current
        dated.append(current)
    return [dated[end - 1] if 0 < end <= len(dated) else None for end in ends]


def iso_day(text: str) -> date | None:
    """The date an ISO string names, else None."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def format_day(iso: str) -> str:
    """``2023-05-08`` as shown: ``8 May 2023`` (the text itself when it is no ISO date)."""
    day = iso_day(iso)
    if day is None:
        return iso
    return f"{day.day} {_MONTH_NAMES[day.month - 1]} {day.year}"

"""The times a text speaks of, as date ranges: for time-aware memory search. Pure: no clock.

``spoken_periods(text, on)``: the periods a memory's text mentions, each resolved against
``on``, the date its exchange happened (``ctxproxy.strategies.dates``): "yesterday" on 8 May
2023 is 7 May; "last week" the ten days before; "two weeks ago" the week around 24 April;
"last month" April 2023; "in June" the last June at or before it (June 2022), "next month"
June 2023; "May 2023", "in 2022" and full dates ("3 May 2023") as they say.

``query_period(query, reference)``: the one period a question names, resolved against
``reference`` (the newest date the memory knows: a question is asked after everything it
remembers), or None when it names none. "What did Joanna do in May?" → the last May;
"Who did Maria have dinner with on May 3, 2023?" → that day.

A period is an inclusive ``(first, last)`` pair of dates; ``overlaps`` compares two. Month
names without a preposition are not read ("May" is also a verb).
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, date, datetime, timedelta
from typing import Final

from ctxproxy.memory.cards import MemoryCard
from ctxproxy.strategies.dates import DATE, MONTH, MONTHS, date_in, iso_day

__all__ = ["Period", "doc_day", "overlaps", "query_period", "spoken_periods"]

Period = tuple[date, date]
_COUNTS: Final = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_COUNTS_VAGUE: Final = {"few": 3, "couple of": 2}
_COUNT: Final = r"(?P<n>\d{1,2}|an?|one|two|three|four|five|six|few|couple of)"
_WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_RELATIVE: Final = re.compile(
    r"\b(?:(?P<yesterday>yesterday|last night)|(?P<today>today|tonight|this (?:morning|afternoon|evening))"
    r"|(?P<tomorrow>tomorrow)|(?P<lastweek>last week(?:end)?|(?:this )?past week(?:end)?|the week before)"
    r"|(?P<thisweek>this week(?:end)?)|(?P<nextweek>next week(?:end)?)"
    r"|(?P<lastmonth>last month)|(?P<thismonth>this month)|(?P<nextmonth>next month)"
    r"|(?P<lastyear>last year)|(?P<thisyear>this year)|(?P<nextyear>next year)"
    rf"|{_COUNT} (?P<unit>day|week|month|year)s? ago"
    rf"|last (?P<weekday>{'|'.join(_WEEKDAYS)})"
    rf"|(?P<monthyear>(?P<my_m>{MONTH})(?:,)?\s+(?P<my_y>\d{{4}}))"
    rf"|(?:in|during|since|until|of|early|mid|late|beginning of|end of)\s+(?:early |mid |late )?"
    rf"(?P<month>{MONTH})(?:,?\s+(?P<month_y>\d{{4}}))?\b"
    r"|\b(?:in|during|since|of) (?P<year>(?:19|20)\d\d))\b",
    re.IGNORECASE,
)
_FULL_DATE: Final = re.compile(DATE, re.IGNORECASE)
_YEAR: Final = re.compile(r"\d{4}")
# Every expression above has one of these (a cheap test first: most sentences name no time).
_TRIGGER: Final = re.compile(
    r"yesterday|last|toni|today|tomorrow|this |next |ago\b|past |before|\d{4}"
    r"|(?:in|during|since|until|of|early|mid|late) (?:early |mid |late )?"
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
)


def _month(year: int, month: int) -> Period:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _shift_month(on: date, months: int) -> Period:
    index = on.year * 12 + on.month - 1 + months
    return _month(index // 12, index % 12 + 1)


def _month_number(text: str) -> int:
    return MONTHS[text.lower().rstrip(".")]


def _ago(n: int, unit: str, on: date) -> Period:
    if unit == "day":
        return on - timedelta(days=n), on - timedelta(days=n)
    if unit == "week":
        middle = on - timedelta(weeks=n)
        return middle - timedelta(days=4), middle + timedelta(days=3)
    if unit == "month":
        return _shift_month(on, -n)
    return date(on.year - n, 1, 1), date(on.year - n, 12, 31)


def _calendar(match: re.Match[str], on: date) -> Period | None:
    """A month or year the match names, the last one at or before ``on`` when no year is given."""
    if match.group("monthyear"):
        return _month(int(match.group("my_y")), _month_number(match.group("my_m")))
    if match.group("month"):
        month = _month_number(match.group("month"))
        if match.group("month_y"):
            return _month(int(match.group("month_y")), month)
        return _month(on.year if month <= on.month else on.year - 1, month)
    if match.group("year"):
        year = int(match.group("year"))
        return date(year, 1, 1), date(year, 12, 31)
    return None


def _resolve(match: re.Match[str], on: date) -> Period | None:  # noqa: PLR0911 -- one return per kind
    day = timedelta(days=1)
    if match.group("yesterday"):
        return on - day, on - day
    if match.group("today"):
        return on, on
    if match.group("tomorrow"):
        return on + day, on + day
    if match.group("lastweek"):
        return on - 10 * day, on - day
    if match.group("thisweek"):
        return on - 6 * day, on + 6 * day
    if match.group("nextweek"):
        return on + day, on + 10 * day
    for group, months in (("lastmonth", -1), ("thismonth", 0), ("nextmonth", 1)):
        if match.group(group):
            return _shift_month(on, months)
    for group, years in (("lastyear", -1), ("thisyear", 0), ("nextyear", 1)):
        if match.group(group):
            return date(on.year + years, 1, 1), date(on.year + years, 12, 31)
    if match.group("unit"):
        count = match.group("n").lower()
        n = int(count) if count.isdigit() else {**_COUNTS, **_COUNTS_VAGUE}[count]
        return _ago(n, match.group("unit").lower(), on)
    if match.group("weekday"):
        back = (on.weekday() - _WEEKDAYS.index(match.group("weekday").lower())) % 7 or 7
        return on - back * day, on - back * day
    return _calendar(match, on)


def _resolved(match: re.Match[str], on: date) -> Period | None:
    """``_resolve``, or None when the period falls outside the calendar (year 1 to 9999)."""
    try:
        return _resolve(match, on)
    except (ValueError, OverflowError):
        return None


def _periods(text: str, on: date) -> list[Period]:
    found: list[Period] = []
    if _YEAR.search(text):
        found += [(d, d) for d, _, _ in date_in(text)]
        text = _FULL_DATE.sub(" ", text)  # a full date's month is not read again as a bare month
    lower = text.lower()
    if _TRIGGER.search(lower):
        found += [p for m in _RELATIVE.finditer(lower) if (p := _resolved(m, on)) is not None]
    return found


def spoken_periods(text: str, on: date) -> list[Period]:
    """``on`` itself, then every period ``text`` mentions, resolved against ``on``."""
    return [(on, on), *_periods(text, on)]


def query_period(query: str, reference: date) -> Period | None:
    """The period the question names (the first), resolved against ``reference``; None: none."""
    found = _periods(query, reference)
    return found[0] if found else None


def overlaps(a: Period, b: Period) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def doc_day(doc: MemoryCard) -> date | None:
    """When a document's exchange happened: its stated date, else the day it was written (UTC);
    None when neither is known."""
    if doc.when is not None:
        return iso_day(doc.when)
    if doc.created_at <= 0:
        return None
    return datetime.fromtimestamp(doc.created_at, UTC).date()

"""Dates a conversation states: date lines, the date of each exchange, how a date is shown."""

from __future__ import annotations

from datetime import date

import pytest

from ctxproxy.strategies.dates import (
    exchange_dates,
    format_day,
    iso_day,
    parse_date,
    stated_date,
    without_date_lines,
)


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("Date: 1:56 pm on 8 May, 2023", date(2023, 5, 8)),  # LoCoMo's session date, labelled
        ("1:56 pm on 8 May, 2023\nCaroline: Hey Mel!", date(2023, 5, 8)),
        ("[8 May 2023]", date(2023, 5, 8)),
        ("Session date: 2023-05-08", date(2023, 5, 8)),
        ("Today is Monday, May 8, 2023.", date(2023, 5, 8)),
        ("<system-reminder>\nToday's date is 2025-11-27.\n</system-reminder>", date(2025, 11, 27)),  # Claude Code
        ("[13:05, 8 May 2023]", date(2023, 5, 8)),
        ("8 May 2023, 2 pm", date(2023, 5, 8)),
        ("Date: 15April, 2022", date(2022, 4, 15)),  # no space, as the release writes some dates
        ("Date: 1 May 2023\nlater\nDate: 3 June 2023", date(2023, 6, 3)),  # the last line wins
    ],
)
def test_a_date_line_gives_the_exchange_its_date(text: str, day: date) -> None:
    assert stated_date(text) == day


@pytest.mark.parametrize(
    "text",
    [
        "I was born on 3 March 1990.",  # a date in a sentence says nothing of when this is said
        "Meet me at 1:56 pm.",
        "Date: 31 February 2023",  # no such day
        "Version 2023 of the tool",
        "",
    ],
)
def test_no_date_line(text: str) -> None:
    assert stated_date(text) is None


def test_dates_in_prose_are_still_read_as_dates() -> None:
    assert parse_date("I was born on 3 March 1990.") == date(1990, 3, 3)
    assert parse_date("on March 3rd, 1990 at noon") == date(1990, 3, 3)
    assert parse_date("nothing here") is None


def test_each_end_gets_the_last_date_stated_before_it() -> None:
    messages = [
        {"role": "system", "content": "You are a friend."},
        {"role": "user", "content": "Date: 1:56 pm on 8 May, 2023\nCaroline: Hey Mel!"},
        {"role": "assistant", "content": "Melanie: Hi!"},
        {"role": "user", "content": [{"type": "text", "text": "[25 May 2023]"}, {"type": "text", "text": "Back."}]},
        {"role": "assistant", "content": "Welcome back."},
        {"role": "tool", "tool_call_id": "c1", "content": "2021-01-01"},  # a tool's output dates nothing
    ]
    assert exchange_dates(messages, [1, 3, 5, 6, 0, 9]) == [None, "2023-05-08", "2023-05-25", "2023-05-25", None, None]


def test_shown_as_day_month_year() -> None:
    assert format_day("2023-05-08") == "8 May 2023"
    assert format_day("2023-10-01") == "1 October 2023"
    assert format_day("not a date") == "not a date"
    assert iso_day("2023-13-01") is None


def test_date_lines_come_out_the_rest_stays() -> None:
    assert without_date_lines("Date: 8 May 2023\nCaroline: Hey") == "Caroline: Hey"
    assert without_date_lines("Born on 3 March 1990.") == "Born on 3 March 1990."

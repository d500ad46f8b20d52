"""Time-aware search: the periods a memory speaks of, the one a question names, and the ranking."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest

from ctxproxy.memory.cards import MemoryCard, page_doc
from ctxproxy.memory.docs import DEFAULT_SEARCH, LayerIndex, search_layers
from ctxproxy.memory.periods import doc_day, query_period, spoken_periods

ON = date(2023, 6, 27)  # a Tuesday


@pytest.mark.parametrize(
    ("text", "period"),
    [
        ("We went camping yesterday.", (date(2023, 6, 26), date(2023, 6, 26))),
        ("I went camping last week.", (date(2023, 6, 17), date(2023, 6, 26))),
        ("Two weeks ago I adopted Coco.", (date(2023, 6, 9), date(2023, 6, 16))),
        ("3 days ago it rained.", (date(2023, 6, 24), date(2023, 6, 24))),
        ("Last month was busy.", (date(2023, 5, 1), date(2023, 5, 31))),
        ("Next month I fly to Paris.", (date(2023, 7, 1), date(2023, 7, 31))),
        ("In August we moved.", (date(2022, 8, 1), date(2022, 8, 31))),  # the last August before it
        ("It opened in March 2021.", (date(2021, 3, 1), date(2021, 3, 31))),
        ("It was back in 2019.", (date(2019, 1, 1), date(2019, 12, 31))),
        ("Last Friday was fun.", (date(2023, 6, 23), date(2023, 6, 23))),
        ("On 3 May 2023 we met.", (date(2023, 5, 3), date(2023, 5, 3))),
    ],
)
def test_relative_dates_resolve_against_the_pages_own_date(text: str, period: tuple[date, date]) -> None:
    spoken = spoken_periods(text, ON)
    assert spoken[0] == (ON, ON) and period in spoken[1:]


def test_a_month_name_without_a_preposition_is_no_time() -> None:
    assert spoken_periods("May I ask something?", ON) == [(ON, ON)]


@pytest.mark.parametrize(
    ("question", "period"),
    [
        ("When did Melanie go camping in June?", (date(2023, 6, 1), date(2023, 6, 30))),
        ("What did Melanie do in October?", (date(2022, 10, 1), date(2022, 10, 31))),
        ("Where did Joanna travel to in July 2022?", (date(2022, 7, 1), date(2022, 7, 31))),
        ("Who did Maria have dinner with on May 3, 2023?", (date(2023, 5, 3), date(2023, 5, 3))),
        ("What did she do last week?", (date(2023, 6, 17), date(2023, 6, 26))),
        ("Which tournament did Nate win in the beginning of November 2022?", (date(2022, 11, 1), date(2022, 11, 30))),
        ("What is Caroline's favourite book?", None),
    ],
)
def test_the_time_a_question_names(question: str, period: tuple[date, date] | None) -> None:
    assert query_period(question, ON) == period


def dated_page(n: int, text: str, when: str) -> MemoryCard:
    return page_doc(n, [{"role": "user", "content": text}], "s1", 1.0, when)


PAGES = [
    dated_page(1, "Caroline: I went hiking with my friends at the lake.", "2023-05-08"),
    dated_page(2, "Caroline: We had a picnic, nothing special.", "2023-05-25"),
    dated_page(3, "Caroline: I went hiking at the lake.", "2023-07-12"),
    dated_page(4, "Caroline: Hiking yesterday was lovely, friends at the lake.", "2023-09-02"),
]


def test_a_question_naming_a_time_prefers_the_page_of_then() -> None:
    index = LayerIndex.build(PAGES, DEFAULT_SEARCH)
    assert index.latest == date(2023, 9, 2)
    question = "Where did Caroline go hiking with friends in July?"
    [top] = search_layers(question, [("session", index)], 1)
    assert top.doc.page == 3
    [words_alone] = search_layers(question, [("session", index)], 1, params=replace(DEFAULT_SEARCH, time_weight=0))
    assert words_alone.doc.page != 3
    # Resolved against the page's own date: hiking "yesterday" on 2 September was 1 September.
    [top] = search_layers("Where did Caroline go hiking with friends on 1 September 2023?", [("session", index)], 1)
    assert top.doc.page == 4
    # No time named: no preference, the words alone decide.
    plain = search_layers("Where did Caroline go hiking?", [("session", index)], 4)
    assert [h.doc.page for h in plain][0] != 2


def test_when_is_kept_and_checked_in_the_stored_shape() -> None:
    page = PAGES[0]
    assert page.to_json()["when"] == "2023-05-08"
    assert MemoryCard.from_json(page.to_json()) == page
    assert MemoryCard.from_json({**page.to_json(), "when": "8 May"}).when is None  # type: ignore[union-attr]
    assert "when" not in page_doc(1, [{"role": "user", "content": "hi"}], "s1", 1.0).to_json()


def test_a_documents_day_is_its_stated_date_else_the_day_it_was_written() -> None:
    assert doc_day(PAGES[0]) == date(2023, 5, 8)
    written = page_doc(1, [{"role": "user", "content": "hi"}], "s1", 1_700_000_000.0)
    assert doc_day(written) == date(2023, 11, 14)
    assert doc_day(page_doc(1, [{"role": "user", "content": "hi"}], "s1", 0.0)) is None


def test_a_period_outside_the_calendar_is_no_period() -> None:
    """A stated date at the calendar's edge with a relative time beyond it: no error, no period."""
    assert spoken_periods("That was 99 years ago.", date(50, 1, 1)) == [(date(50, 1, 1), date(50, 1, 1))]
    edge = date(9999, 12, 31)
    assert spoken_periods("See you tomorrow, and next month.", edge) == [(edge, edge)]
    assert query_period("What happened last year?", date(1, 3, 1)) is None


def test_a_question_naming_one_day_prefers_that_days_page_more_than_a_month_would() -> None:
    """One day holds a session or two, a month many: a page of the named day may rise past a
    page whose words match better, by more than the preference for a named month lifts it."""
    pages = [
        dated_page(
            1,
            "Joanna: Last night I finally saw it, the one you told me about, with popcorn and my cousins. A movie!",
            "2022-05-02",
        ),
        dated_page(
            20, "Joanna: Movie night: I watch a movie with Nate every week, we watched three movies.", "2022-05-20"
        ),
        dated_page(40, "Joanna: Writing all day, no time for anything else.", "2022-06-10"),
    ]
    index = LayerIndex.build(pages, DEFAULT_SEARCH)
    question = "What movie did Joanna watch on 1 May, 2022?"
    [top] = search_layers(question, [("session", index)], 1)
    assert top.doc.page == 1  # "last night" on 2 May was 1 May
    as_month = replace(DEFAULT_SEARCH, day_weight=DEFAULT_SEARCH.time_weight)
    [top] = search_layers(question, [("session", index)], 1, params=as_month)
    assert top.doc.page == 20
    [off] = search_layers(question, [("session", index)], 1, params=replace(DEFAULT_SEARCH, time_weight=0))
    assert off.doc.page == 20  # no time preference at all: the words alone decide

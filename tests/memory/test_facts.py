"""A speaker's sentence as a fact of its own (issue 27.3), and small talk that is no fact."""

from __future__ import annotations

import pytest

from ctxproxy.memory.facts import as_fact, small_talk


@pytest.mark.parametrize(
    ("sentence", "fact"),
    [
        ("I went to a support group yesterday.", "Caroline went to a support group on 7 May 2023."),
        ("I love painting with my kids.", "Caroline loves painting with Caroline's kids."),
        ("I'm so proud of the team.", "Caroline is so proud of the team."),
        ("I've been thinking about adoption.", "Caroline has been thinking about adoption."),
        ("I really enjoy it.", "Caroline really enjoys it."),
        ("I try to go every week.", "Caroline tries to go every week."),
        ("I watch movies tonight.", "Caroline watches movies on 8 May 2023."),
        ("I go hiking.", "Caroline goes hiking."),
        ("I bought it in Paris.", "Caroline bought it in Paris."),  # an irregular past form stays
        ("Yes, I do.", "Caroline does."),  # a leading interjection goes
        ("Wow, you did great on your exam!", "Melanie did great on Melanie's exam!"),
        ("You're so brave, and you inspire me.", "Melanie is so brave, and Melanie inspires Caroline."),
        ("I told you about it.", "Caroline told Melanie about it."),
        ("My dog is called Max.", "Caroline's dog is called Max."),
        ("Thanks for telling me.", "Thanks for telling Caroline."),
    ],
)
def test_the_first_person_becomes_the_speaker_and_a_relative_day_its_date(sentence: str, fact: str) -> None:
    assert as_fact(sentence, "Caroline", "2023-05-08", "Melanie") == fact


def test_without_a_date_relative_days_stay_and_without_a_person_the_words_are_reported() -> None:
    assert as_fact("I went there yesterday.", "Jon", None) == "Jon went there yesterday."
    assert as_fact("The kids loved it.", "Jon", "2023-05-08") == "Jon said on 8 May 2023 that the kids loved it."
    assert (
        as_fact("It rained yesterday.", "Jon", "2023-05-08") == "Jon said on 8 May 2023 that it rained on 7 May 2023."
    )
    assert as_fact("Imagine the island.", "Jon", None) == "Jon said that Imagine the island."  # "Imagine" is no "I"
    assert as_fact("You did it.", "Jon", None) == "Jon said that you did it."  # no addressee known


@pytest.mark.parametrize(
    ("sentence", "talk"),
    [
        ("Thanks, Gina!", True),
        ("Wow, Caroline, that sounds awesome!", True),
        ("Long time no talk.", True),
        ("I went to a support group yesterday.", False),
        ("We got another cat named Bailey too.", False),
        ("It also helps to have a good support system.", False),
    ],
)
def test_small_talk(sentence: str, talk: bool) -> None:
    assert small_talk(sentence) is talk


def test_a_day_before_the_calendar_stays_as_said() -> None:
    assert as_fact("I left yesterday.", "Jon", "0001-01-01") == "Jon left yesterday."

"""Cards from raw messages (the paged strategy's archived pages): the few most informative
sentences, typed by cue words, each a fact of its own: who said or did what, when."""

from __future__ import annotations

from typing import Any

from ctxproxy.memory.cards import MAX_CARDS_PER_PAGE, cards_from_messages, speaker_of

PAGE: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful assistant. You must always answer in English."},
    {
        "role": "user",
        "content": "Hi! How are you? We decided to deploy the billing service on Kubernetes 1.29 in Frankfurt. Thanks.",
    },
    {
        "role": "assistant",
        "content": "Great. You must never store card numbers in the application logs. "
        "Next I will write the Helm chart for the staging cluster. Sounds good!",
    },
]


def test_at_most_three_informative_sentences_in_conversation_order() -> None:
    cards = cards_from_messages(PAGE, "session:1", 50.0, page=7)
    assert len(cards) == MAX_CARDS_PER_PAGE
    assert [card.content for card in cards] == [
        "The user said that we decided to deploy the billing service on Kubernetes 1.29 in Frankfurt.",
        "The user must never store card numbers in the application logs.",  # "you": whom the assistant told
        "Next the assistant will write the Helm chart for the staging cluster.",
    ]
    assert all(card.page == 7 and card.source == "session:1" and card.created_at == 50.0 for card in cards)


def test_typed_by_cue_words() -> None:
    assert [card.type for card in cards_from_messages(PAGE, "s", 1.0, 1)] == ["decision", "constraint", "todo"]


def test_system_messages_questions_and_small_talk_are_skipped() -> None:
    contents = " ".join(card.content for card in cards_from_messages(PAGE, "s", 1.0, 1))
    assert "helpful assistant" not in contents
    assert "How are you" not in contents and "Thanks" not in contents and "Sounds good" not in contents


def test_more_informative_sentences_win_the_cap() -> None:
    messages = [
        {
            "role": "user",
            "content": "I like it a lot. " * 1 + "The staging database runs Postgres 16.2 on db-7 since March 2024.",
        },
        {
            "role": "assistant",
            "content": "That is nice. Nice indeed. The cluster has three nodes in Frankfurt and Dublin.",
        },
    ]
    contents = [card.content for card in cards_from_messages(messages, "s", 1.0, 1)]
    assert any("Postgres 16.2" in content for content in contents)
    assert any("Frankfurt and Dublin" in content for content in contents)
    assert not any("Nice indeed" in content for content in contents)


def test_goal_code_and_fact_cues() -> None:
    messages = [
        {"role": "user", "content": "I want to migrate the reporting jobs off the old cron server."},
        {"role": "assistant", "content": "Run `kubectl rollout restart deploy/reports` after the change."},
        {"role": "assistant", "content": "The reporting jobs currently take forty minutes every night."},
    ]
    assert [card.type for card in cards_from_messages(messages, "s", 1.0, 1)] == ["goal", "code", "fact"]


def test_fenced_code_becomes_a_code_card() -> None:
    messages = [{"role": "assistant", "content": "Use this:\n```bash\npg_dump -Fc orders > orders.dump\n```"}]
    cards = cards_from_messages(messages, "s", 1.0, 1)
    assert [card.type for card in cards] == ["code"]
    assert "pg_dump -Fc orders" in cards[0].content


def test_speaker_name_from_the_name_field_or_a_label_in_the_content() -> None:
    named = {"role": "user", "name": "Melanie", "content": "We went camping in the Rockies with the kids last weekend."}
    labelled = {"role": "assistant", "content": "Caroline: I joined a mentorship program for LGBTQ youth yesterday."}
    cards = cards_from_messages([named, labelled], "s", 1.0, 3)
    # No first person: the speaker's words, reported; in the first person: a fact about the speaker.
    assert [card.content for card in cards] == [
        "Melanie said that we went camping in the Rockies with the kids last weekend.",
        "Caroline joined a mentorship program for LGBTQ youth yesterday.",
    ]
    assert cards[0].tags[0] == "Melanie" and cards[1].tags[0] == "Caroline"
    assert speaker_of({"role": "tool", "content": "x"}) == ("Tool", None)


def test_a_speakers_first_person_sentence_becomes_a_fact_with_its_day() -> None:
    said = [
        {"role": "user", "content": "Date: 1:56 pm on 8 May, 2023\nCaroline: I went to a support group yesterday."},
        {"role": "assistant", "content": "Melanie: I love painting landscapes with my kids on weekends."},
        {"role": "user", "content": "I'm moving the billing service to Frankfurt next quarter."},  # no name
    ]
    cards = cards_from_messages(said, "s", 1.0, 3, "2023-05-08")
    assert [card.content for card in cards] == [
        "Caroline went to a support group on 7 May 2023.",
        "Melanie loves painting landscapes with Melanie's kids on weekends.",
        "The user is moving the billing service to Frankfurt next quarter.",
    ]
    assert all(card.when == "2023-05-08" for card in cards)
    # The same words another day are another card: the day is part of the fact.
    again = cards_from_messages(said[:1], "s", 2.0, 9, "2023-06-01")
    assert again[0].content == "Caroline went to a support group on 31 May 2023." and again[0].id != cards[0].id
    assert speaker_of({"role": "tool", "content": "x"}) == ("Tool", None)


def test_content_parts_and_chinese_text() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "我们讨论了GPU选型的问题，决定采用H100。"},
                {"type": "image_url", "image_url": {"url": "x"}},
            ],
        },
    ]
    cards = cards_from_messages(messages, "s", 1.0, 1)
    assert len(cards) == 1 and cards[0].type == "decision"
    assert "GPU选型" in cards[0].content


def test_nothing_worth_keeping_gives_no_cards() -> None:
    assert (
        cards_from_messages([{"role": "user", "content": "ok"}, {"role": "assistant", "content": "Sure!"}], "s", 1.0, 1)
        == []
    )
    assert cards_from_messages([], "s", 1.0, 1) == []


def test_type_comes_from_the_sentence_not_the_speaker_name() -> None:
    message = {"role": "user", "name": "Will", "content": "The staging cluster runs on three nodes in Frankfurt."}
    assert [card.type for card in cards_from_messages([message], "s", 1.0, 1)] == ["fact"]

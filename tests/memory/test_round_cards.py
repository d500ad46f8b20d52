"""Note 002's per-round extraction, pure: which rounds are finished, and what one finished round
says of the user (the profile: "仅抽 Profile") and of the project (the scope's facts)."""

from __future__ import annotations

from typing import Any

from ctxproxy.memory.round_cards import MAX_USER_CARDS, completed_rounds, extract_round, from_notes


def roles(*names: str) -> list[dict[str, Any]]:
    return [{"role": name, "content": "x"} for name in names]


def test_finished_rounds_newest_first_and_only_before_a_new_user_message() -> None:
    conversation = roles("system", "user", "assistant", "user", "assistant", "tool", "assistant", "user")
    assert list(completed_rounds(conversation)) == [(3, 7), (1, 3)]
    assert list(completed_rounds(roles("user", "assistant", "tool"))) == []  # inside a round
    assert list(completed_rounds(roles("user", "user", "assistant", "user"))) == [(1, 3)]  # unanswered: none
    assert list(completed_rounds(roles("user"))) == []


def exchange(user: str, assistant: str = "Noted.") -> list[dict[str, Any]]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


def test_the_profile_is_what_the_user_says_of_themselves() -> None:
    said = (
        "I'm a data engineer at Acme. Please always answer in French. We decided to use PostgreSQL 16 for "
        "the orders service. Do you like Python?"
    )
    found = extract_round(exchange(said, "Bien sûr, PostgreSQL 16 it is."), "s", 1.0)
    assert [(c.type, c.content) for c in found.user] == [
        ("fact", "User: I'm a data engineer at Acme."),
        ("constraint", "User: Please always answer in French."),
    ]
    assert any("PostgreSQL 16 for the orders service" in c.content for c in found.scope)
    assert not {c.id for c in found.user} & {c.id for c in found.scope}
    assert all(c.source == "s" and c.created_at == 1.0 for c in (*found.user, *found.scope))


def test_the_assistant_and_questions_are_not_the_users_profile() -> None:
    found = extract_round(exchange("Am I a good cook?", "I'm a helpful assistant and I love cooking."), "s", 1.0)
    assert found.user == ()


def test_a_speaker_label_names_the_user_and_cjk_cues_count() -> None:
    found = extract_round(exchange("Caroline: I live in Lisbon and I love painting."), "s", 1.0)
    assert [c.content for c in found.user] == ["Caroline: I live in Lisbon and I love painting."]
    assert found.user[0].tags[0] == "Caroline"
    chinese = extract_round(exchange("我叫小明，我是后端工程师。请不要用英文回答。我们决定用 Redis 做缓存。"), "s", 1.0)
    assert [c.type for c in chinese.user] == ["fact", "constraint"]
    assert any("Redis" in c.content for c in chinese.scope)


def test_at_most_a_few_profile_cards_a_round() -> None:
    said = " ".join(f"I like topic number {i}." for i in range(10))
    assert len(extract_round(exchange(said), "s", 1.0).user) == MAX_USER_CARDS


def test_a_models_notes_become_typed_cards() -> None:
    found = from_notes(["Never use emojis in answers.", "Alice works in Berlin."], ["We chose Redis."], "s", 2.0)
    assert [(c.type, c.content) for c in found.user] == [
        ("constraint", "Never use emojis in answers."),
        ("fact", "Alice works in Berlin."),
    ]
    assert [(c.type, c.content) for c in found.scope] == [("decision", "We chose Redis.")]

"""A session's history and the names its record keeps: pure updates, bounded."""

from __future__ import annotations

import pytest

from ctxproxy.session import SessionKey
from ctxproxy.session.records import MAX_HISTORY, MAX_NAMES, Observation, appended, history_entries, touch

KEY = SessionKey("acme", "chat-1", "header")


def seen(at: float, **kw: object) -> Observation:
    return Observation(at=at, messages=3, tokens=100, head="ab", model="m", **kw)  # type: ignore[arg-type]


def test_an_entry_says_what_was_sent_and_forwarded() -> None:
    assert seen(5.0, forwarded=40, compacted=True).entry() == {
        "at": 5.0,
        "before": 100,
        "after": 40,
        "compacted": True,
        "retried": False,
    }
    # A request that ended before anything was forwarded counts its prompt as it came.
    assert seen(5.0).entry()["after"] == 100


def test_appended_keeps_time_order_and_the_newest_entries() -> None:
    history: list = []
    for batch in range(5):
        entries = [seen(batch * 100 + i, forwarded=i).entry() for i in range(60)]
        history = appended(history, reversed(entries))
    assert len(history) == MAX_HISTORY
    assert [e["at"] for e in history] == sorted(e["at"] for e in history)
    assert history[-1]["at"] == 459
    assert min(e["at"] for e in history) == sorted(b * 100 + i for b in range(5) for i in range(60))[-MAX_HISTORY]


def test_a_malformed_history_reads_as_its_good_entries() -> None:
    good = seen(1.0, forwarded=50).entry()
    assert history_entries("junk") == [] and history_entries(None) == []
    mixed = [
        good,
        {"at": "x", "before": 1, "after": 1},
        {"at": 2, "before": True, "after": 1},
        7,
        {"at": 0.5, "before": 9, "after": 3},
    ]
    assert [e["at"] for e in history_entries(mixed)] == [0.5, 1.0]
    assert appended(mixed, [])[1] == good


def test_the_record_keeps_the_newest_distinct_users_and_scopes() -> None:
    record = touch(None, KEY, seen(1.0, user="alice", scope="billing"))
    assert record["users"] == ["alice"] and record["scopes"] == ["billing"]
    batch = [seen(2.0 + i, user=f"u{i}") for i in range(MAX_NAMES + 3)]
    record = touch(record, KEY, batch[-1], len(batch), batch)
    assert record["users"] == [f"u{i}" for i in range(3, MAX_NAMES + 3)]
    assert record["scopes"] == ["billing"] and record["requests"] == 1 + len(batch)
    again = touch(record, KEY, seen(50.0, user="u3"))
    assert again["users"][-1] == "u3" and len(again["users"]) == MAX_NAMES
    # Without a user or scope, the record has neither field.
    assert "users" not in touch(None, KEY, seen(1.0)) and "scopes" not in touch(None, KEY, seen(1.0))
    assert touch({"users": "junk"}, KEY, seen(1.0, user="bob"))["users"] == ["bob"]


def test_an_observation_is_immutable_and_keeps_its_defaults() -> None:
    one = seen(1.0)
    with pytest.raises(AttributeError):
        one.at = 2.0  # type: ignore[misc]
    assert (one.forwarded, one.user, one.scope, one.protocol, one.kind) == (None,) * 5
    assert one.compacted is False and one.retried is False
    assert one.reached_upstream is True and one.billed is None and one.nano_usd is None
    assert one == seen(1.0) != seen(1.0, forwarded=5) and hash(one) == hash(seen(1.0))
    assert one.entry() == {"at": 1.0, "before": 100, "after": 100, "compacted": False, "retried": False}

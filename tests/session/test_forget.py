"""Deleting a session deletes exactly what the Store keeps of it: its record, history,
checkpoints, pending compaction, pages, recall counts and session-layer memories (every user's,
without a user, per scope, lineage-bound) — and nothing of another session, user or scope, even
one whose key starts like it."""

from __future__ import annotations

from ctxproxy.memory.cards import MemoryCard, card_id
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import Layer, MemoryScope
from ctxproxy.session import PrefixChain, SessionKey
from ctxproxy.session.forget import forget_session, session_keys
from ctxproxy.session.recorder import SessionRecorder
from ctxproxy.session.records import Observation
from ctxproxy.store import Store
from ctxproxy.store import keys as k

A = SessionKey("acme", "chat", "header")
LOOKALIKE = SessionKey("acme", "chat:1", "header")  # its page keys start with A's page prefix
DERIVED = SessionKey("acme", "chat", "derived")


def card(content: str) -> MemoryCard:
    return MemoryCard(card_id(content), content, "fact", (), 1.0, "src")


def scopes(key: SessionKey) -> list[MemoryScope]:
    chain = PrefixChain.of([{"role": "user", "content": "hi"}])
    return [
        MemoryScope("acme", key.store_id, user="alice"),
        MemoryScope("acme", key.store_id, user="bob"),
        MemoryScope("acme", key.store_id, scope="billing"),
        MemoryScope("acme", key.store_id),
        MemoryScope("acme", key.store_id, lineage=chain),
    ]


async def fill(store: Store, memories: MemoryStore, key: SessionKey) -> None:
    recorder = SessionRecorder(store)
    recorder.observe(key, Observation(1.0, 2, 10, "ab", "m", scope="billing"), ttl=3600)
    recorder.observe(key, Observation(2.0, 4, 20, "cd", "m", user="alice"), ttl=3600)
    await recorder.flush()
    await store.put(k.checkpoints_key(key), {"checkpoints": []})
    await store.put(k.compaction_pending_key(key), {"x": 1})
    await store.put(k.page_recalls_key(key), {"1:00ab": {"count": 1, "last_turn": 3}})
    for page in ("1:00ab", "2:ff01"):
        await store.put(k.archived_page_key(key, page), {"messages": []})
    for scope in scopes(key):
        await memories.add(scope, [card(f"{key.value} {scope.user} {scope.scope} keeps the orders database.")])


async def test_forget_deletes_every_key_of_the_session_and_no_other(store: Store) -> None:
    memories = MemoryStore(store)
    for key in (A, LOOKALIKE, DERIVED):
        await fill(store, memories, key)
    everything = set(await store.keys("ctx:"))
    own = {key for key in await session_keys(store, A) if key in everything}
    layers = [scope.session_layer.key for scope in scopes(A)]
    expected_layers = set(layers) | {k.layer_version_key(layer) for layer in layers}
    assert expected_layers <= own
    assert {k.session_record_key(A), k.session_history_key(A), k.checkpoints_key(A), k.page_recalls_key(A)} <= own
    assert {k.archived_page_key(A, "1:00ab"), k.archived_page_key(A, "2:ff01")} <= own
    assert not own & set(await session_keys(store, LOOKALIKE)) and not own & set(await session_keys(store, DERIVED))

    assert await forget_session(store, A) is True
    assert set(await store.keys("ctx:")) == everything - own
    # The users' own layers and the scope's layer keep the cards written there too.
    for layer in (Layer("acme", "user", "alice"), Layer("acme", "scope", "billing")):
        assert any("chat alice" in c.content or "billing" in c.content for c in await memories.list_layer(layer))
    assert await memories.search(scopes(A)[3], "orders database", 5) == []
    assert [h.doc.content for h in await memories.search(scopes(LOOKALIKE)[3], "orders database", 5)] == [
        "chat:1 None None keeps the orders database."
    ]
    assert await forget_session(store, A) is False

"""Deleting memories really deletes them: a later search does not find them, cache or not."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from proxy.memory.cards import MemoryCard, card_id
from proxy.memory.memories import MemoryStore
from proxy.memory.scopes import Layer, MemoryScope
from proxy.store import Store, open_store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = open_store("diskcache", tmp_path / "store")
    yield s
    await s.close()


@pytest.fixture
def memories(store: Store) -> MemoryStore:
    return MemoryStore(store)


def card(content: str, type_: str = "fact") -> MemoryCard:
    return MemoryCard(card_id(content), content, type_, (), 1.0, "src")  # type: ignore[arg-type]


SCOPE = MemoryScope("acme", "acme:h:s1", user="u")
PORT = card("The orders database listens on port 5433.")
OWNER = card("Alice owns the orders database.")


async def found(memories: MemoryStore, scope: MemoryScope = SCOPE, query: str = "orders database") -> set[str]:
    return {hit.doc.content for hit in await memories.search(scope, query, 10)}


async def test_delete_from_a_layer(memories: MemoryStore) -> None:
    await memories.add(SCOPE, [PORT, OWNER])
    assert await found(memories) == {PORT.content, OWNER.content}  # also warms the index cache
    session = Layer("acme", "session", "acme:h:s1")
    assert await memories.delete(session, [PORT.id, "no-such-id"]) == 1
    assert await memories.delete(session, [PORT.id]) == 0
    assert [c.id for c in await memories.list_layer(session)] == [OWNER.id]
    # the user layer still has it: a user-level delete is a separate call
    assert await found(memories) == {PORT.content, OWNER.content}
    assert await memories.delete(Layer("acme", "user", "u"), [PORT.id]) == 1
    assert await found(memories) == {OWNER.content}


async def test_forget_removes_every_copy_in_the_tenant(memories: MemoryStore, store: Store) -> None:
    other_session = MemoryScope("acme", "acme:h:s2", user="u")
    other_tenant = MemoryScope("zeta", "zeta:h:s1", user="u")
    await memories.add(SCOPE, [PORT, OWNER])
    await memories.add(other_session, [PORT])
    await memories.add(other_tenant, [PORT])
    assert await found(memories, other_session) == {PORT.content, OWNER.content}  # OWNER via the user layer
    assert await memories.forget("acme", [PORT.id]) == 3  # user layer + two session layers
    assert await found(memories) == {OWNER.content}
    assert await found(memories, other_session) == {OWNER.content}
    assert await found(memories, other_tenant) == {PORT.content}  # another tenant is untouched
    assert await memories.forget("acme", [PORT.id]) == 0
    # a layer emptied by forget is removed
    assert Layer("acme", "session", "acme:h:s2").key not in await store.keys("ctx:acme:mem:")


async def test_clear_removes_the_layer(memories: MemoryStore, store: Store) -> None:
    await memories.add(SCOPE, [PORT, OWNER])
    await found(memories)
    user = Layer("acme", "user", "u")
    assert await memories.clear(user) == 2
    assert await store.get(user.key) is None
    assert await memories.list_layer(user) == []
    assert await memories.clear(user) == 0
    assert await found(memories, MemoryScope("acme", "acme:h:new", user="u")) == set()


async def test_a_layer_recreated_after_clear_is_not_served_from_a_stale_cache(memories: MemoryStore) -> None:
    await memories.add(SCOPE, [PORT])
    assert await found(memories) == {PORT.content}
    await memories.clear(Layer("acme", "user", "u"))
    await memories.clear(Layer("acme", "session", "acme:h:s1"))
    await memories.add(SCOPE, [OWNER])  # rev 1 again, but a new epoch
    assert await found(memories) == {OWNER.content}


async def test_a_second_process_sees_the_delete(memories: MemoryStore, store: Store) -> None:
    replica = MemoryStore(store)  # another proxy process on the same store, with its own cache
    await memories.add(SCOPE, [PORT, OWNER])
    assert await found(replica) == {PORT.content, OWNER.content}
    await memories.forget("acme", [OWNER.id])
    assert await found(replica) == {PORT.content}

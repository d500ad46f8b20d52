"""The per-instance cache of tokenised layers: repeated searches do not re-tokenise, a change
does; corrupt layer values read as empty; Store failures propagate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import proxy.memory.docs as docs_module
from proxy.memory.cards import MemoryCard, card_id
from proxy.memory.docs import SearchParams
from proxy.memory.memories import MemoryStore
from proxy.memory.scopes import Layer, MemoryScope
from proxy.store import Store, StoreError, open_store

SCOPE = MemoryScope("acme", "acme:h:s1")
SESSION = Layer("acme", "session", "acme:h:s1")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = open_store("diskcache", tmp_path / "store")
    yield s
    await s.close()


def card(content: str) -> MemoryCard:
    return MemoryCard(card_id(content), content, "fact", (), 1.0, "src")


@pytest.fixture
def tokenised(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every document tokenised for the index."""
    seen: list[str] = []
    original = docs_module.doc_terms

    def counting(doc: MemoryCard, params: SearchParams) -> dict[str, float]:
        seen.append(doc.content)
        return original(doc, params)

    monkeypatch.setattr(docs_module, "doc_terms", counting)
    return seen


async def test_repeated_searches_tokenise_each_document_once(store: Store, tokenised: list[str]) -> None:
    memories = MemoryStore(store)
    await memories.add(SCOPE, [card("Alpha release on Monday."), card("Beta release on Friday.")])
    for _ in range(3):
        assert len(await memories.search(SCOPE, "release", 5)) == 2
    assert sorted(tokenised) == ["Alpha release on Monday.", "Beta release on Friday."]
    await memories.add(SCOPE, [card("Gamma release in June.")])
    assert len(await memories.search(SCOPE, "release", 5)) == 3
    assert tokenised[2:] == ["Gamma release in June."]  # only the new document


async def test_cache_is_per_instance_and_bounded(store: Store, tokenised: list[str]) -> None:
    first, second = MemoryStore(store, cache_layers=2), MemoryStore(store, cache_layers=2)
    for n in range(4):
        scope = MemoryScope("acme", f"acme:h:{n}")
        await first.add(scope, [card(f"Note {n} about releases.")])
        await first.search(scope, "releases", 3)
    assert first.cache_info == (2, 2)
    assert second.cache_info == (0, 2)


async def test_corrupt_layer_values_read_as_empty(store: Store) -> None:
    memories = MemoryStore(store)
    await store.put(SESSION.key, "not a layer")
    assert await memories.search(SCOPE, "anything", 5) == []
    assert await memories.list_layer(SESSION) == []
    await store.put(SESSION.key, {"docs": [{"content": 3}, "junk", card("Valid release note.").to_json()]})
    assert [hit.doc.content for hit in await memories.search(SCOPE, "release", 5)] == ["Valid release note."]
    assert await memories.add(SCOPE, [card("Another release note.")]) == 1  # the corrupt value is replaced
    assert len(await memories.list_layer(SESSION)) == 2


async def test_store_errors_propagate(tmp_path: Path) -> None:
    store = open_store("diskcache", tmp_path / "closed")
    memories = MemoryStore(store)
    await store.close()
    with pytest.raises(StoreError):
        await memories.search(SCOPE, "release", 5)
    with pytest.raises(StoreError):
        await memories.add(SCOPE, [card("x y z")])


async def test_empty_query_or_top_k_searches_nothing(store: Store) -> None:
    memories = MemoryStore(store)
    await memories.add(SCOPE, [card("Alpha release on Monday.")])
    assert await memories.search(SCOPE, "   ", 5) == []
    assert await memories.search(SCOPE, "release", 0) == []
    assert await memories.search(SCOPE, "the and of", 5) == []  # stop words only

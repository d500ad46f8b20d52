"""The per-instance cache of tokenised layers: repeated searches do not re-tokenise, a change
does; corrupt layer values read as empty; Store failures propagate."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxproxy.memory.docs as docs_module
from ctxproxy.memory.cards import MemoryCard, card_id
from ctxproxy.memory.docs import SearchParams
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import Layer, MemoryScope
from ctxproxy.store import Store, StoreError, open_store

SCOPE = MemoryScope("acme", "acme:h:s1")
SESSION = Layer("acme", "session", "acme:h:s1")


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


class CountingStore:
    """A real store that records which keys were read."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def get(self, key: str) -> object:
        self.reads.append(key)
        return await self.inner.get(key)


async def test_an_unchanged_layer_is_not_read_again(store: Store) -> None:
    counting = CountingStore(store)
    memories = MemoryStore(counting)  # type: ignore[arg-type]
    await memories.add(SCOPE, [card(f"Release note {i} about the billing service.") for i in range(50)])
    await memories.search(SCOPE, "billing", 5)
    counting.reads.clear()
    hits = await memories.search(SCOPE, "billing", 5)
    assert len(hits) == 5
    assert counting.reads == [SESSION.key + ":v"]  # the small version entry only
    assert await memories.has_docs(SCOPE) and SESSION.key not in counting.reads

    # another writer (a second instance, as another replica would be) changes it: read again
    await MemoryStore(store).add(SCOPE, [card("Billing moved to the new ledger.")])
    counting.reads.clear()
    hits = await memories.search(SCOPE, "ledger", 5)
    assert hits[0].doc.content == "Billing moved to the new ledger."
    assert SESSION.key in counting.reads


async def test_the_same_search_of_the_same_revisions_is_answered_from_the_last(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``search_memo``: asked again of unchanged layers, a search is not scored again; another
    query, another ``top_k``, other kinds or a new revision are."""
    import ctxproxy.memory.memories as memories_module

    scored: list[str] = []
    original = memories_module.search_layers

    def counting(query: str, *args: object, **kwargs: object) -> list[docs_module.Hit]:
        scored.append(query)
        return original(query, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(memories_module, "search_layers", counting)
    memories = MemoryStore(store)
    await memories.add(SCOPE, [card("Alpha release on Monday."), card("Beta release on Friday.")])
    first = await memories.search(SCOPE, "release Monday", 5)
    assert [hit.doc.content for hit in first][0] == "Alpha release on Monday." and len(first) == 2
    assert await memories.search(SCOPE, "release Monday", 5) == first
    assert scored == ["release Monday"]
    assert await memories.search(SCOPE, "release Friday", 5) != first
    assert len(await memories.search(SCOPE, "release Monday", 1)) == 1
    assert await memories.search(SCOPE, "release Monday", 5, kinds=("page",)) == []
    assert scored == ["release Monday", "release Friday", "release Monday", "release Monday"]
    await memories.add(SCOPE, [card("Gamma release on Monday evening.")])
    assert len(await memories.search(SCOPE, "release Monday", 5)) == 3  # a new revision: scored
    assert len(scored) == 5

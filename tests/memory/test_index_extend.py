"""An index brought in place to a new revision — pages and cards appended, some dropped
(``LayerIndex.extend`` and ``drop``, what a write does to a cached layer) — ranks exactly as one
built from scratch over the same documents; a write brings a searched layer's cached index up
to date, so the next search reads and builds nothing, at the layer's cap too."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxproxy.memory.docs as docs_module
from ctxproxy.memory import layer_values
from ctxproxy.memory.cards import MemoryCard, card_id
from ctxproxy.memory.docs import DEFAULT_SEARCH, LayerIndex, SearchParams, search_layers
from ctxproxy.memory.index_cache import next_index
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import MemoryScope
from ctxproxy.store import Store

WORDS = ["release", "billing", "snake", "Paris", "bike", "ledger", "Monday", "port", "cluster", "garden"]
QUERIES = ["release billing", "snake Paris Monday", "bike ledger port garden", "cluster", "Paris Paris release"]
SCOPE = MemoryScope("acme", "acme:h:s1")


@st.composite
def documents(draw: st.DrawFn, start: int) -> list[MemoryCard]:
    """A batch of pages (mostly numbered after everything before them) and cards."""
    out = []
    for n in range(draw(st.integers(1, 6))):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8))
        kind = draw(st.sampled_from(["page", "page", "card"]))
        page = draw(st.integers(0, 3)) + start + n if kind == "page" else draw(st.none() | st.integers(0, 40))
        tags = tuple(draw(st.lists(st.sampled_from(WORDS), max_size=2)))
        when = float(draw(st.integers(0, 3)))  # equal times: ties fall to the order documents came in
        content = " ".join(words)
        out.append(MemoryCard("", content, "fact", tags, when, "src", page, kind))  # type: ignore[arg-type]
    return out


def ranking(index: LayerIndex, params: SearchParams) -> list[list[tuple[str, float]]]:
    return [[(h.doc.id, h.score) for h in search_layers(q, [("session", index)], 50, params=params)] for q in QUERIES]


def postings(index: LayerIndex) -> dict[str, Any]:
    return {
        name: (
            {term: list(bm25.postings(term)) for term in sorted(bm25._postings)},
            {key: bm25.length(key) for key in bm25.keys()},
            bm25.total_length,
        )
        for name, bm25 in (
            ("cards", index.cards),
            ("pages", index.pages),
            ("ctx", index.contexts),
            ("wide", index.wide),
        )
    }


def unchanged_reason(before: LayerIndex, docs: list[MemoryCard], gone: set[str]) -> bool:
    """Why an index may not be brought to ``docs``: a new page numbered before a kept one, or a
    dropped page whose number a kept page shares."""
    kept_pages = [d.page for i, d in before.docs.items() if i not in gone and d.kind == "page"]
    top = max((p for p in kept_pages if p is not None), default=-1)
    new = [d for d in docs if d.id not in before.docs]
    dropped_pages = {before.docs[i].page for i in gone if before.docs[i].kind == "page"}
    return any(d.kind == "page" and d.page is not None and d.page < top for d in new) or bool(
        dropped_pages & set(kept_pages)
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from([DEFAULT_SEARCH, SearchParams(wide_radius=2), SearchParams(wide_radius=0)]))
def test_extending_and_dropping_rank_as_a_rebuild(data: st.DataObject, params: SearchParams) -> None:
    docs: list[MemoryCard] = []
    index = LayerIndex.build([], params)
    for step in range(data.draw(st.integers(1, 6))):
        if docs and data.draw(st.booleans()):  # the cap drops the oldest, or a delete any of them
            drop = data.draw(st.sets(st.sampled_from([d.id for d in docs]), max_size=3))
            docs = [d for d in docs if d.id not in drop]
        batch = data.draw(documents(max((d.page or 0 for d in docs), default=0)))
        docs += [replace(doc, id=f"d{step}-{i}") for i, doc in enumerate(batch)]
        gone = {i for i in index.docs if i not in {d.id for d in docs}}
        extended = next_index(index, docs, params)
        rebuilt = LayerIndex.build(docs, params)
        if extended is None:  # only a rebuild orders it right
            assert unchanged_reason(index, docs, gone)
            index = rebuilt
            continue
        assert extended is index
        assert ranking(extended, params) == ranking(rebuilt, params)
        assert postings(extended) == postings(rebuilt)
        for name in ("numbers", "periods", "page_ids", "by_lineage", "latest"):
            assert getattr(extended, name) == getattr(rebuilt, name), name
        assert list(extended.docs) == list(rebuilt.docs) and list(extended.tf) == list(rebuilt.tf)


def test_a_changed_prefix_is_not_extended() -> None:
    first = [MemoryCard(card_id(w), w, "fact", (), 1.0, "src", i, "page") for i, w in enumerate(WORDS)]
    index = LayerIndex.build(first, DEFAULT_SEARCH)
    assert next_index(index, first[1:] + first[:1], DEFAULT_SEARCH) is None  # reordered
    assert next_index(index, [first[0], replace(first[1], content="edited"), *first[2:]], DEFAULT_SEARCH) is None


def page(n: int) -> MemoryCard:
    return MemoryCard(
        f"page-{n}", f"page {n} about {WORDS[n % len(WORDS)]} and billing", "fact", (), float(n), "s", n, "page"
    )


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    original = LayerIndex.build.__func__  # type: ignore[attr-defined]

    def counting(cls: type[LayerIndex], docs: Any, params: SearchParams, previous: Any = None) -> LayerIndex:
        seen.append(len(docs))
        index: LayerIndex = original(cls, docs, params, previous)
        return index

    monkeypatch.setattr(docs_module.LayerIndex, "build", classmethod(counting))
    return seen


async def test_a_write_brings_the_cached_index_up_to_date(store: Store, builds: list[int]) -> None:
    memories = MemoryStore(store, max_docs_per_layer=30)
    await memories.add(SCOPE, [page(n) for n in range(20)], to=["session"])
    await memories.search(SCOPE, "billing", 5)
    assert builds == [20]
    for n in range(20, 30):
        await memories.add(SCOPE, [page(n)], to=["session"])
        hits = await memories.search(SCOPE, f"page {n} billing", 3)
        assert hits[0].doc.id == f"page-{n}"
    assert builds == [20]  # each archival extended the index: nothing read or built by a search
    fresh = MemoryStore(store, max_docs_per_layer=30)
    assert [h.doc.id for h in await fresh.search(SCOPE, "release billing", 30)] == [
        h.doc.id for h in await memories.search(SCOPE, "release billing", 30)
    ]
    await memories.add(SCOPE, [page(30)], to=["session"])  # the cap drops page 0: dropped in place too
    assert [h.doc.id for h in await memories.search(SCOPE, "page 30", 1)] == ["page-30"]
    assert "page-0" not in {h.doc.id for h in await memories.search(SCOPE, "page 0 release billing", 30)}
    assert builds == [20, 30]  # the second instance's own build only


async def test_a_write_takes_the_cached_documents_instead_of_parsing_the_layer(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    memories = MemoryStore(store, max_docs_per_layer=30)
    await memories.add(SCOPE, [page(n) for n in range(20)], to=["session"])
    await memories.search(SCOPE, "billing", 5)
    parsed: list[object] = []
    original = MemoryCard.from_json.__func__  # type: ignore[attr-defined]

    def counting(cls: type[MemoryCard], value: Any) -> MemoryCard | None:
        parsed.append(value)
        card: MemoryCard | None = original(cls, value)
        return card

    monkeypatch.setattr(MemoryCard, "from_json", classmethod(counting))
    for n in range(20, 32):  # the cap drops the oldest from 30 on
        await memories.add(SCOPE, [page(n)], to=["session"])
    assert parsed == []
    stored = await MemoryStore(store, max_docs_per_layer=30).list_layer(SCOPE.read_layers()[-1])
    assert stored == [page(n) for n in range(2, 32)]


def test_known_documents_stand_for_their_revision_only() -> None:
    docs = [page(n) for n in range(3)]
    value = {"epoch": "e", "rev": 4, "docs": [d.to_json() for d in docs]}
    cached = [replace(d, content=d.content + " cached") for d in docs]  # told apart from a parse
    assert layer_values.cards(value, (("e", 4), cached)) == cached
    assert layer_values.cards(value, (("e", 3), cached)) == docs
    assert layer_values.cards(value, (("e", 4), cached[:2])) == docs
    assert layer_values.cards(value) == docs

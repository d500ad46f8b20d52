"""The memory search cache is bounded by ``layer_index_bytes``: it must not undercount what a
built ``LayerIndex`` really holds, or the cache would exceed its share."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from ctxproxy.memory.cards import MemoryCard, card_id
from ctxproxy.memory.docs import DEFAULT_SEARCH, LayerIndex
from ctxproxy.memory.index_size import layer_index_bytes


def documents(kind: str, count: int, words: int) -> list[MemoryCard]:
    rng = random.Random(7)
    vocabulary = [f"word{i}" for i in range(3000)] + ["release", "Monday", "Berlin", "Alice"]
    return [
        MemoryCard(
            card_id(f"{kind}{i}"),
            " ".join(rng.choice(vocabulary) for _ in range(words)) + ".",
            "fact",
            ("project",),
            float(i),
            "src",
            page=i if kind == "page" else None,
            kind=kind,  # type: ignore[arg-type]
        )
        for i in range(count)
    ]


@pytest.mark.parametrize(("kind", "count", "words"), [("card", 300, 20), ("page", 40, 300)])
def test_estimate_covers_what_building_allocates(kind: str, count: int, words: int) -> None:
    tracemalloc.start()
    try:
        index = LayerIndex.build(documents(kind, count, words), DEFAULT_SEARCH)
        allocated, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    estimate = layer_index_bytes(index)
    assert allocated <= estimate <= 2 * allocated


def test_an_index_changed_in_place_is_estimated_as_walking_it_afresh() -> None:
    """The estimate keeps each document's share and each BM25 index's postings bytes between
    calls (an archival costs what it changed): after extending and dropping in place it is what
    the first call over the same index gives."""
    pages = documents("page", 60, 80)
    index = LayerIndex.build(pages[:30], DEFAULT_SEARCH)
    layer_index_bytes(index)
    for batch in (pages[30:40], pages[40:60]):
        assert index.extend(batch, DEFAULT_SEARCH)
        index.drop({doc.id for doc in list(index.docs.values())[:5]}, DEFAULT_SEARCH)
        kept = layer_index_bytes(index)
        for bm25 in (index.cards, index.pages, index.contexts, index.wide):
            bm25._arrays_bytes, bm25._touched = None, {}
        index.doc_bytes.clear()
        assert kept == layer_index_bytes(index)

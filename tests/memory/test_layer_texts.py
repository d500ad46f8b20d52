"""A layer holds each document as its own JSON text (``layer_values``): a write reuses the text
of every document it read, cached index or not, and serialises only new or changed ones — the
value written is exactly the one serialising every document gives. A value written before
(documents as objects under ``docs``, or both fields) reads as it did; a write that fails
changes nothing, and the next one, on a real diskcache and a real Redis
(``tests/redis/test_layer_texts.py``), moves every document to ``texts`` and loses none."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.memory import layer_values
from ctxproxy.memory.cards import DocKind, MemoryCard, card_id
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import Layer, MemoryScope
from ctxproxy.session.lineage import Lineage
from ctxproxy.store import JSONValue, Store, open_store
from ctxproxy.store.base import UpdateFn
from ctxproxy.store.keys import layer_version_key

SCOPE = MemoryScope("acme", "acme:h:s1")
LAYER = SCOPE.layers_of(["session"])[0]
SCOPE_LAYER = Layer("acme", "scope", "team")
WORDS = ["release", "billing", "snake", "Paris", "ça", "☃", 'quote "it"', "back\\slash"]


def card(content: str, when: float = 1.0, **fields: Any) -> MemoryCard:
    return MemoryCard(card_id(content), content, "fact", (), when, "src", **fields)


@st.composite
def cards_of(draw: st.DrawFn, prefix: str) -> MemoryCard:
    content = f"{prefix} " + " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))
    vector = draw(st.none() | st.lists(st.floats(-1, 1, allow_nan=False), min_size=2, max_size=2).map(tuple))
    lineage = draw(st.sampled_from([(), (Lineage(3, "ab" * 16),)]))
    page = draw(st.none() | st.integers(0, 9))
    kind: DocKind = draw(st.sampled_from(["card", "page"]))
    when = float(draw(st.integers(0, 3)))
    return MemoryCard(card_id(content), content, "fact", ("t",), when, "s", page, kind, vector, lineage)


def as_stored(value: JSONValue | None) -> JSONValue | None:
    """What a Store hands back for ``value``."""
    stored: JSONValue = orjson.loads(orjson.dumps(value))
    return stored


@st.composite
def edits(draw: st.DrawFn, existing: list[MemoryCard]) -> list[MemoryCard]:
    """``existing`` after a write: some dropped, some rewritten (another lineage, vector or
    time, as ``relined`` and the cap leave them), new ones appended."""
    out = []
    for n, doc in enumerate(existing):
        what = draw(st.sampled_from(["keep", "keep", "drop", "reline", "vector", "equal copy"]))
        if what == "drop":
            continue
        if what == "reline":
            doc = replace(doc, lineage=(*doc.lineage, Lineage(9 + n, "cd" * 16)))
        elif what == "vector":
            doc = replace(doc, vector=(0.123456, -0.5))
        elif what == "equal copy":
            doc = replace(doc)  # equal, not the object read: serialised again all the same
        out.append(doc)
    return out + draw(st.lists(cards_of("new"), max_size=3))


@settings(max_examples=200, deadline=None)
@given(st.data(), st.lists(cards_of("old"), max_size=8), st.booleans(), st.sampled_from([LAYER, SCOPE_LAYER]))
def test_a_write_is_what_serialising_every_document_gives(
    data: st.DataObject, docs: list[MemoryCard], cached: bool, layer: Layer
) -> None:
    first = as_stored(layer_values.layer_value(layer, None, docs, "e0"))
    assert isinstance(first, dict) and "docs" not in first
    assert first["texts"] == [orjson.dumps(doc.to_json()).decode() for doc in docs]
    expected = [MemoryCard.from_json(doc.to_json()) for doc in docs]
    stored = layer_values.Stored(first, (("e0", 1), tuple(docs)) if cached else None)
    assert stored.cards == (docs if cached else expected)
    written = data.draw(edits(stored.cards))
    reused = layer_values.layer_value(layer, first, written, "e1", stored=stored)
    assert reused == layer_values.layer_value(layer, first, written, "e1")
    assert layer_values.cards(as_stored(reused)) == [MemoryCard.from_json(doc.to_json()) for doc in written]


def test_a_value_written_before_reads_texts_then_objects() -> None:
    a, b, c = card("Alpha note."), card("Beta note."), card("Gamma note.")
    old = {"epoch": "e", "rev": 3, "docs": [a.to_json(), b.to_json()]}
    assert layer_values.cards(old) == [a, b]
    mixed = {"epoch": "e", "rev": 4, "texts": [orjson.dumps(c.to_json()).decode()], "docs": [a.to_json()]}
    assert layer_values.cards(mixed) == [c, a] and len(layer_values.raw_docs(mixed)) == 2
    moved = layer_values.rewritten(mixed, [c, a], "x", None, layer_values.Stored(mixed))
    assert "docs" not in moved and layer_values.cards(as_stored(moved)) == [c, a] and moved["rev"] == 5
    junk = {"texts": ["{not json", 3, "[1]", orjson.dumps(b.to_json()).decode()], "docs": ["junk", a.to_json()]}
    assert layer_values.cards(junk) == [b, a]
    removed = layer_values.Removed()
    stripped = layer_values.strip({c.id}, removed)(as_stored(mixed))
    assert (
        isinstance(stripped, dict) and stripped["texts"] == [orjson.dumps(a.to_json()).decode()] and len(removed) == 1
    )


class FailingWrites:
    """A Store whose ``update_many`` fails after every function of the write ran: one more
    update in the same atomic step raises."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def update_many(self, updates: Mapping[str, UpdateFn], *, ttl: float | None = None) -> None:
        def fail(_: JSONValue | None) -> JSONValue | None:
            raise RuntimeError("failed mid-write")

        await self._store.update_many({**updates, "after": fail}, ttl=ttl)


async def writes_lose_nothing(store: Store) -> None:
    """An old-layout layer, a write that fails, then writes through ``MemoryStore`` (a fresh one:
    nothing cached, and one whose index is cached): every document is where it should be."""
    old = [card(f"Old note {n} about billing.", float(n)) for n in range(3)]
    value = {"kind": "session", "ident": LAYER.ident, "epoch": "e", "rev": 2, "docs": [d.to_json() for d in old]}
    await store.put(LAYER.key, value)
    memories = MemoryStore(store)
    assert await memories.list_layer(LAYER) == old
    new = [card("New note about the release.", 5.0), card("Another one about Paris.", 6.0)]
    with pytest.raises(RuntimeError):
        await MemoryStore(cast(Store, FailingWrites(store))).add(SCOPE, new)
    assert await store.get(LAYER.key) == value and await store.get(layer_version_key(LAYER.key)) is None
    assert await memories.add(SCOPE, new[:1]) == 1
    stored = await store.get(LAYER.key)
    assert isinstance(stored, dict) and "docs" not in stored and len(stored["texts"]) == 4
    assert await memories.list_layer(LAYER) == [*old, new[0]]
    assert [h.doc.id for h in await memories.search(SCOPE, "billing", 5)]  # its index is cached now
    assert await memories.add(SCOPE, new[1:]) == 1  # the cached index's documents, their texts reused
    assert await MemoryStore(store).list_layer(LAYER) == [*old, *new]
    version = await store.get(layer_version_key(LAYER.key))
    assert isinstance(version, dict) and version["rev"] == 4 and version["count"] == 5


async def test_writes_over_an_old_layout_lose_nothing_on_diskcache(tmp_path: Path) -> None:
    store = open_store("diskcache", tmp_path / "store")
    try:
        await writes_lose_nothing(store)
    finally:
        await store.close()

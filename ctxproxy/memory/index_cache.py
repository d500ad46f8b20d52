"""The cache of built layer indexes (``memories.MemoryStore``): one ``LayerIndex`` per layer key
and the layer revision it indexes, bounded in bytes by ``index_size.layer_index_bytes``. Pure
(the store is read by the caller).

A newer revision of a cached layer that appends documents, or drops some (the layer's cap, a
delete), is applied to the cached index in place (``LayerIndex.extend`` and ``drop``: what a
rebuild would give, at the cost of the documents added or dropped and the page windows around
them); any other revision (documents rewritten, relined, a page numbered before the newest) is
built anew, reusing the term counts. ``MemoryStore.add`` brings a cached layer up
to the revision it has just written, so the archival's background task pays for the index and
the next search finds it current."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from ctxproxy.cache import ByteLRU
from ctxproxy.memory.cards import MemoryCard
from ctxproxy.memory.docs import LayerIndex, SearchParams
from ctxproxy.memory.index_size import layer_index_bytes

__all__ = ["LayerIndexes", "Revision", "next_index"]

Revision = tuple[str, int]  # (epoch, rev) of a layer value


def next_index(previous: LayerIndex | None, docs: Sequence[MemoryCard], params: SearchParams) -> LayerIndex | None:
    """``previous`` brought in place to index ``docs``, when ``docs`` are some of its documents
    in their order followed by new ones (an archival, the cap dropping the oldest): what it no
    longer has is dropped, the rest added. None, and ``previous`` unchanged, otherwise (then an
    index must be built)."""
    if previous is None:
        return None
    ids = {doc.id for doc in docs}
    kept = [doc for doc in previous.docs.values() if doc.id in ids]
    if len(docs) < len(kept) or any(old is not new and old != new for old, new in zip(kept, docs, strict=False)):
        return None
    gone = {doc_id for doc_id in previous.docs if doc_id not in ids}
    fresh = docs[len(kept) :]
    if (gone and not previous.droppable(gone)) or not previous.appendable(fresh, gone):
        return None
    if gone:
        previous.drop(gone, params)
    previous.extend(fresh, params)
    return previous


class LayerIndexes:
    """The LRU of layer indexes, keyed by layer key (or a view's key), each with its revision."""

    def __init__(self, cache: ByteLRU[str, tuple[Revision, LayerIndex]], params: SearchParams) -> None:
        self._cache = cache
        self._params = params

    def current(self, key: str, revision: Revision | None) -> LayerIndex | None:
        """The cached index of ``key`` when it indexes ``revision``."""
        cached = self._cache.get(key)
        return cached[1] if revision is not None and cached is not None and cached[0] == revision else None

    def cached(self, key: str) -> LayerIndex | None:
        found = self._cache.get(key)
        return found[1] if found is not None else None

    def known(self, key: str) -> tuple[Revision, tuple[MemoryCard, ...]] | None:
        """The revision of ``key``'s cached index and its documents in the layer's order (a copy,
        taken on the event loop: a write's update function may read it in the store's thread),
        for ``layer_values.cards`` to take instead of parsing the layer again."""
        found = self._cache.get(key)
        return (found[0], tuple(found[1].docs.values())) if found is not None else None

    def index(
        self, key: str, stored: Revision | None, docs: Sequence[MemoryCard], base: LayerIndex | None = None
    ) -> LayerIndex:
        """The index of ``docs`` (revision ``stored`` of ``key``), cached unless ``stored`` is None:
        the cached index extended when it can be, else built reusing ``base``'s (default: the
        cached index's) term counts."""
        if stored is None:
            return LayerIndex.build(docs, self._params)
        cached = self.cached(key)
        index = next_index(cached, docs, self._params) if base is None else None
        if index is None:
            index = LayerIndex.build(docs, self._params, base if base is not None else cached)
        self.put(key, stored, index)
        return index

    def put(self, key: str, stored: Revision, index: LayerIndex) -> None:
        # A view's index shares its documents and term counts with the layer's, so its estimate
        # counts them twice: the bound errs on the safe side.
        self._cache.put(key, (stored, index), layer_index_bytes(index))

    async def refresh_all(self, written: Mapping[str, tuple[Revision | None, Sequence[MemoryCard]]]) -> None:
        """``refresh`` each layer written: key -> (revision written, its documents)."""
        for key, (stored, docs) in written.items():
            if stored is not None:
                await self.refresh(key, stored, docs)

    async def refresh(self, key: str, stored: Revision, docs: Sequence[MemoryCard]) -> None:
        """After a write of revision ``stored`` of ``key``: a cached index of the layer is brought
        up to it (extended on the event loop; a rebuild runs in a thread, so that it holds the
        loop as little as the GIL allows). A layer nobody searched is not indexed."""
        found = self._cache.get(key)
        if found is None or found[0] == stored or (found[0][0] == stored[0] and found[0][1] > stored[1]):
            return
        index = next_index(found[1], docs, self._params)
        if index is None:
            index = await asyncio.to_thread(LayerIndex.build, docs, self._params, found[1])
            found = self._cache.get(key)
            if found is not None and found[0][0] == stored[0] and found[0][1] >= stored[1]:
                return  # a newer revision was indexed meanwhile
        self.put(key, stored, index)

"""What a lineage-bound layer's reader read last, so that the next request of its conversation
does not check the layer's every lineage again (``readable.readable_ids``: a prefix hash for
each of the 2,000 pages of a long session, at every search).

Which documents a request may read depends on the layer's revision and on the request's chain
only through its prefixes at the lineages' lengths. A request that repeats the messages of the
one remembered — its chain's prefix hash at the remembered length equals the remembered one,
one hash — has the same prefixes at every length up to that; when no lineage of the layer's
revision is longer, it reads exactly what that one read. Anything else (another revision, a
chain that differs, a lineage longer than what was compared) is checked in full and remembered
in its place. One entry per layer, bounded in bytes by its share ``memory_readers``
(``ctxproxy.cache``); losing one costs a check, never correctness.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ctxproxy.cache import ByteLRU, CachePool
from ctxproxy.memory.docs import LayerIndex
from ctxproxy.memory.index_cache import LayerIndexes, Revision
from ctxproxy.memory.readable import readable_ids, view_key
from ctxproxy.session.digest import PrefixChain

__all__ = ["Part", "Readable", "ReadableMemo"]

# What a layer's part one request searches is, for ``search_memo``: the layer's key, the revision
# of its index and which of its documents (a view's key, or "" for all of them); None when it
# cannot be told (an index read past its version entry).
Part = tuple[str, Revision, str] | None


@dataclass(frozen=True)
class Readable:
    """What a reader may read of a layer: the documents' ids and where the index of them is cached."""

    ids: frozenset[str]
    key: str


@dataclass(frozen=True)
class _Read:
    revision: Revision
    length: int  # how many messages of the reader's chain were compared (the longest lineage's)
    prefix: bytes  # the reader's prefix hash at ``length``
    readable: Readable


class ReadableMemo:
    def __init__(self, cache: ByteLRU[str, _Read] | None = None) -> None:
        self._entries = cache if cache is not None else CachePool().lru("memory_readers")

    def part(
        self, indexes: LayerIndexes, layer_key: str, revision: Revision | None, index: LayerIndex, reader: PrefixChain
    ) -> tuple[LayerIndex, Part]:
        """The index of what ``reader`` may read of the lineage-bound layer ``layer_key`` (its
        index ``index``, at ``revision`` per its version entry), cached in ``indexes`` under its
        view's key; and what it is."""
        known = revision if indexes.current(layer_key, revision) is index else None
        readable = self.readable(layer_key, known, index, reader)
        part = (layer_key, known, readable.key) if known is not None else None
        if len(readable.ids) == len(index.docs):
            return index, part
        if not readable.ids:
            return LayerIndex(), part
        found = indexes.current(readable.key, revision)
        if found is None:
            found = indexes.index(
                readable.key, revision, [d for i, d in index.docs.items() if i in readable.ids], index
            )
        return found, part

    def readable(self, layer_key: str, revision: Revision | None, index: LayerIndex, reader: PrefixChain) -> Readable:
        """What ``reader`` may read of the layer ``layer_key`` (its index ``index``, at
        ``revision``; None: unknown, never remembered)."""
        found = self._entries.get(layer_key) if revision is not None else None
        if (
            found is not None
            and found.revision == revision
            and found.length <= len(reader)
            and reader.prefix_hash(found.length) == found.prefix
        ):
            return found.readable
        ids = readable_ids(index, reader)
        made = Readable(ids, view_key(layer_key, ids))
        if revision is not None:
            longest = max((lineage.length for lineage in index.by_lineage), default=0)
            if longest <= len(reader):
                size = sys.getsizeof(ids) + len(ids) * 8 + sys.getsizeof(made.key) + 200
                self._entries.put(layer_key, _Read(revision, longest, reader.prefix_hash(longest), made), size)
        return made

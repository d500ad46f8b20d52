"""The last search of each set of layers, so that a request asking what the previous one asked
of the same revisions gets its answer without scoring the layers again (~5 ms for a layer of
2,000 pages). An agent's tool round is such a request: memories are searched with the newest
user text, which a tool result leaves as it was, and nothing is archived between compactions.

A search's answer depends only on what it asks (query, how many, which kinds, the query's
embedding) and on the indexes it reads, each told by its layer's key, its revision and which of
its documents the request may read (``readable_memo.Part``): the same parts asked the same give
the same hits. A part that cannot be told (an index read past its version entry) is never
remembered. One entry per set of parts, bounded in bytes by its share ``memory_searches``
(``ctxproxy.cache``); losing one costs a search, never correctness.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from ctxproxy.cache import ByteLRU, CachePool
from ctxproxy.memory.cards import DocKind
from ctxproxy.memory.docs import Hit
from ctxproxy.memory.readable_memo import Part
from ctxproxy.memory.scopes import LayerKind

__all__ = ["Asked", "SearchMemo"]

_HIT_BYTES = 120  # a Hit and its list slot (its document belongs to the layer's index)


@dataclass(frozen=True)
class Asked:
    """What a search asks."""

    query: str
    top_k: int
    kinds: frozenset[DocKind] | None
    vector: Sequence[float] | None


_Parts = tuple[tuple[LayerKind, Part], ...]


class SearchMemo:
    def __init__(self, cache: ByteLRU[_Parts, tuple[Asked, tuple[Hit, ...]]] | None = None) -> None:
        self._entries = cache if cache is not None else CachePool().lru("memory_searches")

    def get(self, parts: Sequence[tuple[LayerKind, Part]], asked: Asked) -> list[Hit] | None:
        """The hits of the last search of ``parts`` when it asked the same; None otherwise."""
        found = self._entries.get(tuple(parts)) if all(part is not None for _, part in parts) else None
        return list(found[1]) if found is not None and found[0] == asked else None

    def put(self, parts: Sequence[tuple[LayerKind, Part]], asked: Asked, hits: Sequence[Hit]) -> None:
        if not all(part is not None for _, part in parts):
            return
        size = sys.getsizeof(asked.query) + len(hits) * _HIT_BYTES + 8 * len(asked.vector or ())
        self._entries.put(tuple(parts), (asked, tuple(hits)), size + 100 * len(parts))

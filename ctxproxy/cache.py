"""In-process caches bounded by bytes: one LRU, the shares of one budget, and size estimates.

Every cache ctxproxy keeps in memory (known conversations, token counts, memory search indexes,
the extractive summariser's analyses, session keys, unknown models, forks told to plugins, rounds
whose memories were extracted, what ctxproxy added to a session's prompt, the prints of each
session's last prompts, the previous request bodies, the checkpoints read last, what each memory layer's last reader
may read, each set of memory layers' last search) is a
``ByteLRU`` whose bound is a fixed share of ``[server] cache_max_bytes``; the shares sum to
100 %, so the bytes all caches account for never exceed the setting. What a cache holds is
estimated, not measured:
``json_size`` is what CPython spends on a parsed JSON value (``sys.getsizeof`` of each object),
and each cache adds what its entries carry besides. Losing an entry costs time, never
correctness. ``Lately`` is no budgeted cache: it holds a few objects a request parsed anyway, and
what was computed from them.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any, Generic, Literal, TypeVar

__all__ = ["DEFAULT_CACHE_MAX_BYTES", "ENTRY_BYTES", "ByteLRU", "CacheName", "CachePool", "Lately", "json_size"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_CACHE_MAX_BYTES = 64 * 1024 * 1024
# What one OrderedDict entry costs besides its key and value: the hash slot, the entry, the
# linked-list node that keeps the order, and the (value, size) pair this LRU stores.
ENTRY_BYTES = 200

CacheName = Literal[
    "known_conversations",
    "memory_indexes",
    "token_counts",
    "summary_analysis",
    "session_keys",
    "unknown_models",
    "learned_windows",
    "forks_told",
    "memory_rounds",
    "memory_pins",
    "prompt_prints",
    "raw_bodies",
    "checkpoints",
    "memory_readers",
    "memory_searches",
]
# Percent of the budget. Known conversations hold whole message lists; a memory index costs
# the most to rebuild (seconds for a layer of hundreds of pages). Prompt prints hold 16 bytes a
# message, twice. Raw bodies hold the previous request body of recent conversations (its messages
# are the known conversations'). Checkpoints hold the session indexes' newest states (a ``paged``
# archive index of ~2 MB at 3,000 messages) and each session's index as last read. The rest hold small entries.
SHARES: Mapping[CacheName, int] = {
    "known_conversations": 28,
    "memory_indexes": 40,
    "token_counts": 4,
    "summary_analysis": 7,
    "session_keys": 1,
    "unknown_models": 1,
    "learned_windows": 1,
    "forks_told": 1,
    "memory_rounds": 1,
    "memory_pins": 1,
    "prompt_prints": 2,
    "raw_bodies": 6,
    "checkpoints": 5,
    "memory_readers": 1,
    "memory_searches": 1,
}


class ByteLRU(Generic[K, V]):
    """A map that drops its least recently used entries to stay within ``max_bytes`` (and
    ``max_entries``, when given). Each entry is accounted as the size its caller states plus
    ``ENTRY_BYTES``; an entry larger than the whole budget is not kept. Event-loop use only."""

    def __init__(self, max_bytes: int, *, max_entries: int | None = None) -> None:
        if max_bytes < 0 or (max_entries is not None and max_entries < 0):
            raise ValueError("cache bounds must be >= 0")
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0

    @property
    def nbytes(self) -> int:
        """The bytes accounted for the entries held now (always ≤ ``max_bytes``)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: K) -> V | None:
        """The value under ``key``, now the most recently used; None when absent."""
        found = self._entries.get(key)
        if found is None:
            return None
        self._entries.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V, size: int) -> bool:
        """Hold ``value`` under ``key`` (replacing any older value), accounted as ``size`` bytes
        plus the entry's own; evict the least recently used entries until within the bounds.
        False when the entry alone is over the budget: then ``key`` holds nothing."""
        self.pop(key)
        cost = size + ENTRY_BYTES
        if cost > self.max_bytes or self.max_entries == 0:
            return False
        self._entries[key] = (value, cost)
        self._bytes += cost
        while self._bytes > self.max_bytes or (self.max_entries is not None and len(self._entries) > self.max_entries):
            _, (_, evicted) = self._entries.popitem(last=False)
            self._bytes -= evicted
        return True

    def pop(self, key: K) -> V | None:
        found = self._entries.pop(key, None)
        if found is None:
            return None
        self._bytes -= found[1]
        return found[0]


class Lately(Generic[V]):
    """What was computed for the last ``size`` objects (each with a tag), found by identity: each
    object is held, so its id is not another's while it is kept. Only for objects nobody changes
    in place (a parsed body's values, which a body that goes on shares with the previous one)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._kept: dict[tuple[int, str], tuple[object, V]] = {}

    def get(self, obj: object, tag: str) -> V | None:
        kept = self._kept.get((id(obj), tag))
        return kept[1] if kept is not None and kept[0] is obj else None

    def put(self, obj: object, tag: str, value: V) -> V:
        if len(self._kept) >= self._size:
            del self._kept[next(iter(self._kept))]
        self._kept[(id(obj), tag)] = (obj, value)
        return value

    def __len__(self) -> int:
        return len(self._kept)


class CachePool:
    """The process's cache budget: hands each cache its share as a ``ByteLRU`` and totals them.
    One per app (the app's resources create it from ``[server] cache_max_bytes``)."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._caches: dict[CacheName, ByteLRU[Any, Any]] = {}

    def share(self, name: CacheName) -> int:
        return self.max_bytes * SHARES[name] // 100

    def lru(self, name: CacheName, *, max_entries: int | None = None) -> ByteLRU[Any, Any]:
        """The cache ``name``'s LRU, bounded by its share; each name is handed out once."""
        if name in self._caches:
            raise ValueError(f"cache {name!r} already has its LRU")
        cache: ByteLRU[Any, Any] = ByteLRU(self.share(name), max_entries=max_entries)
        self._caches[name] = cache
        return cache

    @property
    def nbytes(self) -> int:
        return sum(cache.nbytes for cache in self._caches.values())

    def usage(self) -> dict[CacheName, int]:
        """Bytes accounted per cache handed out (for tests and the bench)."""
        return {name: cache.nbytes for name, cache in self._caches.items()}


_SCALARS = frozenset({str, int, float, bool, type(None)})  # JSON's leaves, by exact type


def json_size(value: object) -> int:
    """Bytes CPython spends on a JSON-shaped value (dicts, lists, tuples, strings, numbers):
    the sum of ``sys.getsizeof`` over every object in it. Strings count their real width (one
    emoji makes each character of its string take 4 bytes), so this can be several times the
    JSON text's length; an object that appears twice is counted twice. Iterative: a value
    nested as deep as a parser allows cannot exhaust the stack."""
    getsizeof = sys.getsizeof
    if type(value) is dict:  # the common chat message: a role and its text (and name), strings all
        total = getsizeof(value)
        for key, entry in value.items():
            if type(key) is not str or type(entry) is not str:
                break
            total += getsizeof(key) + getsizeof(entry)
        else:
            return total
    total = 0
    stack = [value]
    push = stack.append
    while stack:
        item = stack.pop()
        total += getsizeof(item)
        if isinstance(item, dict):
            for key, entry in item.items():  # a scalar is counted here, not pushed to be popped
                if type(key) in _SCALARS:
                    total += getsizeof(key)
                else:
                    push(key)
                if type(entry) in _SCALARS:
                    total += getsizeof(entry)
                else:
                    push(entry)
        elif isinstance(item, list | tuple):
            for entry in item:
                if type(entry) in _SCALARS:
                    total += getsizeof(entry)
                else:
                    push(entry)
    return total

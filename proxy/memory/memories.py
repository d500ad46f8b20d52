"""``MemoryStore``: memory documents in the ``Store``, per layer, and the search over a scope's layers.

The only module of ``proxy.memory`` (with ``embeddings``) that does I/O. A layer is one store
value (``scopes.Layer.key``)::

    {"kind": "session", "ident": "<raw id>", "epoch": "<random hex>", "rev": 7, "docs": [<doc>, ...]}

``docs`` are ``MemoryCard.to_json`` objects, oldest first. Every write is one atomic
``update_many`` over the layers it touches, so concurrent writers (replicas, background
compactions) never lose each other's documents. ``rev`` goes up with every change and
``epoch`` is drawn when the layer is created: together with the key they name one exact
content, which is what the per-instance LRU of tokenised layers (``docs.LayerIndex``) is
keyed by. Beside each layer a small *version* entry (``<layer key>:v`` →
``{"epoch", "rev", "count"}``) is written in the same atomic step, so a search first reads the
versions (other replicas write too) and reads and re-tokenises only a layer that changed: an
unchanged 2,000-document layer costs one tiny read, not a parse of megabytes. A cleared layer
loses both keys, and the next one gets a new epoch, so a stale index can never answer for it.

Writes de-duplicate by id (the normalised-content hash for cards): a document already in the
layer is left as it is, so a rolling summary that repeats itself changes nothing. A layer over
``max_docs_per_layer`` drops its oldest documents (by ``created_at``).

Errors: a ``StoreError`` propagates (the caller decides whether memory is worth failing a
request for); a value that is not a layer, and documents in it that are not documents, read
as absent.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from proxy.memory.cards import DocKind, MemoryCard
from proxy.memory.docs import DEFAULT_SEARCH, Hit, LayerIndex, SearchParams, search_layers
from proxy.memory.scopes import Layer, LayerKind, MemoryScope, layer_prefix
from proxy.store.base import JSONValue, Store, UpdateFn

__all__ = ["Hit", "MemoryStore"]

DEFAULT_MAX_DOCS = 2000
DEFAULT_CACHE_LAYERS = 64
VERSION_SUFFIX = ":v"


def version_key(layer_key: str) -> str:
    return layer_key + VERSION_SUFFIX


def _with_version(key: str, fn: UpdateFn) -> dict[str, UpdateFn]:
    """``fn`` on the layer and, in the same atomic ``update_many`` (which applies its functions
    in order), the layer's version entry set from what ``fn`` produced."""
    produced: dict[str, JSONValue | None] = {}

    def layer(current: JSONValue | None) -> JSONValue | None:
        new = fn(current)
        version = _version(new)
        produced["v"] = {"epoch": version[0], "rev": version[1], "count": len(_raw_docs(new))} if version else None
        return new

    def version(current: JSONValue | None) -> JSONValue | None:
        return produced["v"]

    return {key: layer, version_key(key): version}


def _raw_docs(value: JSONValue | None) -> list[Any]:
    if isinstance(value, dict):
        docs = value.get("docs")
        if isinstance(docs, list):
            return docs
    return []


def _cards(value: JSONValue | None) -> list[MemoryCard]:
    return [card for raw in _raw_docs(value) if (card := MemoryCard.from_json(raw)) is not None]


def _version(value: JSONValue | None) -> tuple[str, int] | None:
    """``(epoch, rev)`` of a layer value, or None when it has none (not cacheable)."""
    if not isinstance(value, dict):
        return None
    epoch, rev = value.get("epoch"), value.get("rev")
    if isinstance(epoch, str) and isinstance(rev, int) and not isinstance(rev, bool):
        return epoch, rev
    return None


def _version_entry(value: JSONValue | None) -> tuple[str, int, int] | None:
    """``(epoch, rev, count)`` of a version entry, or None."""
    if not isinstance(value, dict):
        return None
    epoch, rev, count = value.get("epoch"), value.get("rev"), value.get("count")
    if isinstance(epoch, str) and all(isinstance(v, int) and not isinstance(v, bool) for v in (rev, count)):
        return epoch, int(rev), int(count)  # type: ignore[arg-type]
    return None


def _layer_value(layer: Layer, previous: JSONValue | None, docs: list[MemoryCard], epoch: str) -> JSONValue:
    version = _version(previous)
    return {
        "kind": layer.kind,
        "ident": layer.ident,
        "epoch": version[0] if version else epoch,
        "rev": version[1] + 1 if version else 1,
        "docs": [doc.to_json() for doc in docs],
    }


def _capped(docs: list[MemoryCard], cap: int) -> list[MemoryCard]:
    """The newest ``cap`` documents, in their stored order (oldest dropped; ties: earlier stored)."""
    if len(docs) <= cap:
        return docs
    order = sorted(range(len(docs)), key=lambda i: (docs[i].created_at, i))
    dropped = set(order[: len(docs) - cap])
    return [doc for i, doc in enumerate(docs) if i not in dropped]


class MemoryStore:
    """Memory layers in a ``Store``; see the module docstring. One per process (it holds a cache)."""

    def __init__(
        self,
        store: Store,
        max_docs_per_layer: int = DEFAULT_MAX_DOCS,
        *,
        params: SearchParams = DEFAULT_SEARCH,
        cache_layers: int = DEFAULT_CACHE_LAYERS,
    ) -> None:
        if max_docs_per_layer < 1:
            raise ValueError(f"max_docs_per_layer must be at least 1, got {max_docs_per_layer}")
        self._store = store
        self._cap = max_docs_per_layer
        self._params = params
        self._cache_size = cache_layers
        self._cache: OrderedDict[str, tuple[tuple[str, int], LayerIndex]] = OrderedDict()  # key -> (version, index)

    # -- writing -------------------------------------------------------------------------------

    async def add(self, scope: MemoryScope, docs: Iterable[MemoryCard]) -> int:
        """Write ``docs`` to their layers (``MemoryScope.write_layers``) in one atomic step;
        returns how many of them (distinct ids) are new to at least one layer and stayed there
        (a document older than everything a full layer holds is dropped at once)."""
        per_layer: dict[str, tuple[Layer, dict[str, MemoryCard]]] = {}
        for doc in docs:
            for layer in scope.write_layers(doc):
                per_layer.setdefault(layer.key, (layer, {}))[1].setdefault(doc.id, doc)
        if not per_layer:
            return 0
        added: set[str] = set()
        epoch = secrets.token_hex(8)

        def merge(layer: Layer, new: dict[str, MemoryCard]) -> UpdateFn:
            def fn(current: JSONValue | None) -> JSONValue | None:
                existing = _cards(current)
                known = {doc.id for doc in existing}
                fresh = [doc for doc_id, doc in new.items() if doc_id not in known]
                if not fresh and _version(current) is not None:
                    return current
                kept = _capped(existing + fresh, self._cap)
                survivors = {doc.id for doc in kept}
                added.update(doc.id for doc in fresh if doc.id in survivors)
                return _layer_value(layer, current, kept, epoch)

            return fn

        updates: dict[str, UpdateFn] = {}
        for key, (layer, new) in per_layer.items():
            updates |= _with_version(key, merge(layer, new))
        await self._store.update_many(updates)
        return len(added)

    async def delete(self, layer: Layer, ids: Collection[str]) -> int:
        """Remove the documents ``ids`` from ``layer``; returns how many were there. An emptied
        layer is removed."""
        wanted = set(ids)
        removed = 0

        def fn(current: JSONValue | None) -> JSONValue | None:
            nonlocal removed
            existing = _cards(current)
            kept = [doc for doc in existing if doc.id not in wanted]
            removed = len(existing) - len(kept)
            if not removed:
                return current
            return _layer_value(layer, current, kept, secrets.token_hex(8)) if kept else None

        if wanted:
            await self._store.update_many(_with_version(layer.key, fn))
        return removed

    async def forget(self, tenant: str, ids: Collection[str], kinds: Collection[LayerKind] | None = None) -> int:
        """Remove the documents ``ids`` from every layer of ``tenant`` (of ``kinds``: a card
        written for a user also sits in the session layers it came from); returns how many
        copies were removed."""
        wanted = set(ids)
        keys: list[str] = []
        for kind in kinds or (None,):
            listed = await self._store.keys(layer_prefix(tenant, kind)) if wanted else []
            keys += [key for key in listed if not key.endswith(VERSION_SUFFIX)]
        if not keys:
            return 0
        removed = 0

        def strip(current: JSONValue | None) -> JSONValue | None:
            nonlocal removed
            if not isinstance(current, dict):
                return current
            docs = _raw_docs(current)
            kept = [raw for raw in docs if not (isinstance(raw, dict) and raw.get("id") in wanted)]
            if len(kept) == len(docs):
                return current
            removed += len(docs) - len(kept)
            version = _version(current)
            if not kept:
                return None
            return {**current, "rev": (version[1] if version else 0) + 1, "docs": kept}

        updates: dict[str, UpdateFn] = {}
        for key in keys:
            updates |= _with_version(key, strip)
        await self._store.update_many(updates)
        return removed

    async def clear(self, layer: Layer) -> int:
        """Remove the whole layer; returns how many documents it had."""
        count = 0

        def fn(current: JSONValue | None) -> JSONValue | None:
            nonlocal count
            count = len(_cards(current))
            return None

        await self._store.update_many(_with_version(layer.key, fn))
        return count

    # -- reading -------------------------------------------------------------------------------

    async def list_layer(self, layer: Layer) -> list[MemoryCard]:
        """The layer's documents, oldest first."""
        return _cards(await self._store.get(layer.key))

    async def search(
        self,
        scope: MemoryScope,
        query: str,
        top_k: int,
        *,
        kinds: Collection[DocKind] | None = None,
        query_vector: Sequence[float] | None = None,
    ) -> list[Hit]:
        """The ``top_k`` best documents of the scope's layers (``docs.search_layers``)."""
        return await self.search_layers(scope.read_layers(), query, top_k, kinds=kinds, query_vector=query_vector)

    async def search_layers(
        self,
        layers: Sequence[Layer],
        query: str,
        top_k: int,
        *,
        kinds: Collection[DocKind] | None = None,
        query_vector: Sequence[float] | None = None,
    ) -> list[Hit]:
        """``search`` over the given layers (broadest first), e.g. one user's layer for the admin API."""
        if top_k <= 0 or not layers or not query.strip():
            return []
        versions = await self._versions(layers)
        indexes = await asyncio.gather(*(self._index(layer.key, v) for layer, v in zip(layers, versions, strict=True)))
        kinds_indexes = [(layer.kind, index) for layer, index in zip(layers, indexes, strict=True)]
        return search_layers(query, kinds_indexes, top_k, kinds=kinds, query_vector=query_vector, params=self._params)

    async def has_docs(self, scope: MemoryScope) -> bool:
        """Whether any of the scope's layers holds a document (is there anything to search?):
        the version entries say, without reading the layers (a layer without one is read)."""
        layers = scope.read_layers()
        for layer, version in zip(layers, await self._versions(layers), strict=True):
            if version is not None and version[2] > 0:
                return True
            if version is None and _raw_docs(await self._store.get(layer.key)):
                return True
        return False

    async def _versions(self, layers: Sequence[Layer]) -> list[tuple[str, int, int] | None]:
        values = await asyncio.gather(*(self._store.get(version_key(layer.key)) for layer in layers))
        return [_version_entry(value) for value in values]

    async def _index(self, key: str, version: tuple[str, int, int] | None) -> LayerIndex:
        """The layer's index: the cached one when its version is current, else read and built."""
        cached = self._cache.get(key)
        if version is not None and cached is not None and cached[0] == version[:2]:
            self._cache.move_to_end(key)
            return cached[1]
        value = await self._store.get(key)
        stored = _version(value)
        if stored is None:
            return LayerIndex.build(_cards(value), self._params)
        # What was read may be newer than the version entry: it is cached under its own version.
        index = LayerIndex.build(_cards(value), self._params, cached[1] if cached is not None else None)
        self._cache[key] = (stored, index)  # replaces the layer's older revision
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return index

    @property
    def cache_info(self) -> tuple[int, int]:
        """(cached layer indexes, capacity): for tests and the bench."""
        return len(self._cache), self._cache_size

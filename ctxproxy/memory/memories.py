"""``MemoryStore``: memory documents in the ``Store``, per layer, and the search over a scope's layers.

The only module of ``ctxproxy.memory`` (with ``embeddings``) that does I/O. A layer is one store
value (``scopes.Layer.key``), built and changed by the pure functions of ``layer_values``:

    {"kind": "session", "ident": "<raw id>", "owner": "<user>", "epoch": "<random hex>", "rev": 7,
     "texts": ["<doc JSON>", ...], "writers": {"<doc id>": ["alice", null], ...}}

``texts``: each document's ``MemoryCard.to_json`` as a JSON text, oldest first (a write
serialises only what it adds or changes; documents stored as objects under ``docs`` by an
earlier version read after them, ``layer_values``); ``owner``: a user's session layer only;
``writers``: scope layers only, who wrote each card (``null``: no user, or not recorded). Every write is one atomic
``update_many`` over the layers it touches, so concurrent writers (replicas, background
compactions) never lose each other's documents. ``rev`` goes up with every change of ``docs``
and ``epoch`` is drawn when the layer is created: together with the key they name one exact
content, which is what the per-instance LRU of tokenised layers (``docs.LayerIndex``) is
keyed by. Beside each layer a small *version* entry (``store.keys.layer_version_key`` →
``{"epoch", "rev", "count"}``) is written in the same atomic step, so a search first reads the
versions (other replicas write too) and reads and re-tokenises only a layer that changed: an
unchanged 2,000-document layer costs one tiny read, not a parse of megabytes; a write extends
a cached index to what it wrote (``index_cache``), so a search after an archival waits for
neither. A cleared layer loses both keys, and the next one gets a new epoch, so a stale index
can never answer for it.

**Lineage-bound layers** (an anonymous session's, ``scopes.Layer.bound``) are shared by every
stranger who opened the same way, so a request reads only the documents whose lineage it
extends (``ctxproxy.session.lineage.visible``, against ``MemoryScope.lineage``): a search ranks
them as a layer of their own — an index of just those documents, built from the layer's
cached index without tokenising anything again, and cached beside it under the layer key and
a digest of the ids it holds (``_view``), so the usual case, one conversation's requests
between two archivals, builds it once. When every document is readable, the layer's own
index is used. ``has_docs`` counts readable documents only. Writing a document that is
already there with another lineage adds that lineage to it (``layer_values.relined``).

Writes de-duplicate by id (the normalised-content hash for cards): a document already in the
layer is left as it is (a scope layer only adds the new writer), so a rolling summary that
repeats itself changes nothing. A new card replaces an older near-duplicate or a card it
contradicts (``supersede``: the older text kept as its history), except in lineage-bound layers,
shared by strangers. A layer over ``max_docs_per_layer`` drops its oldest documents
(by ``created_at``).

**A user's memories** (the admin API: ``user_memories``, ``search_user``,
``delete_user_memories``) are their user layer, their own session layers (all under
``store.keys.user_owned_prefix``, found with one ``keys`` scan) and the cards they wrote to scope layers
(the layers their writer markers point at, filtered by ``writers``). Deleting them rewrites
only those layers, one atomic step per layer — never another user's layer. In a shared scope
layer a delete takes the user off the card's writers, and the card goes with its last writer:
a teammate who wrote the same card (the same id: ids are content hashes) keeps it, because it
is their memory too. The writer marker is dropped in the same step as the layer once the user
has no card left there, so a concurrent write (which sets the marker in its own step) is never
left unmarked.

Errors: a ``StoreError`` propagates (the caller decides whether memory is worth failing a
request for); a value that is not a layer, and documents in it that are not documents, read
as absent.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from ctxproxy.cache import ByteLRU, CachePool
from ctxproxy.memory import layer_values
from ctxproxy.memory.cards import DocKind, MemoryCard
from ctxproxy.memory.docs import DEFAULT_SEARCH, Hit, LayerIndex, SearchParams, search_layers
from ctxproxy.memory.index_cache import LayerIndexes, Revision
from ctxproxy.memory.readable import readable_ids
from ctxproxy.memory.readable_memo import Part, ReadableMemo
from ctxproxy.memory.scopes import Layer, LayerKind, MemoryScope
from ctxproxy.memory.search_memo import Asked, SearchMemo
from ctxproxy.memory.supersede import superseded
from ctxproxy.session.digest import PrefixChain
from ctxproxy.store.base import JSONValue, Store, UpdateFn
from ctxproxy.store.keys import (
    is_layer_version_key,
    layer_version_key,
    scope_layer_of_marker,
    user_layer_key,
    user_owned_prefix,
    user_sessions_prefix,
    writer_marker_key,
    writer_markers_prefix,
)

__all__ = ["Hit", "MemoryStore"]

DEFAULT_MAX_DOCS = 2000
DEFAULT_CACHE_LAYERS = 64
DELETE_BATCH = 32  # a user's own layers rewritten per atomic step by a delete


@dataclass(frozen=True)
class _UserLayers:
    """The keys of what one user's requests wrote: their user layer, their own session layers,
    and (writer marker key, scope layer key) for each scope layer they wrote cards to."""

    user: str
    sessions: tuple[str, ...]
    scopes: tuple[tuple[str, str], ...]


class MemoryStore:
    """Memory layers in a ``Store``; see the module docstring. One per process (it holds a cache)."""

    def __init__(
        self,
        store: Store,
        max_docs_per_layer: int = DEFAULT_MAX_DOCS,
        *,
        params: SearchParams = DEFAULT_SEARCH,
        cache_layers: int = DEFAULT_CACHE_LAYERS,
        cache: ByteLRU[str, tuple[Revision, LayerIndex]] | None = None,
        readers: ReadableMemo | None = None,
        searches: SearchMemo | None = None,
    ) -> None:
        """``cache``: the LRU of built layer indexes (default: its share of the default cache
        budget, at most ``cache_layers`` layers); ``readers`` and ``searches``: what each
        lineage-bound layer's last reader read, each set of layers' last search (default: their
        share of the default budget)."""
        if max_docs_per_layer < 1:
            raise ValueError(f"max_docs_per_layer must be at least 1, got {max_docs_per_layer}")
        self._store = store
        self._cap = max_docs_per_layer
        self._params = params
        self._cache = cache if cache is not None else CachePool().lru("memory_indexes", max_entries=cache_layers)
        self._indexes = LayerIndexes(self._cache, params)
        self._readers = readers if readers is not None else ReadableMemo()
        self._searches = searches if searches is not None else SearchMemo()

    # -- writing -------------------------------------------------------------------------------

    async def add(
        self, scope: MemoryScope, docs: Iterable[MemoryCard], *, to: Sequence[LayerKind] | None = None
    ) -> int:
        """Write ``docs`` to their layers (``MemoryScope.write_layers``; with ``to``, the scope's
        layers of those kinds) in one atomic step, recording the request's user as a writer of
        the cards that go to a scope layer (and the user's writer marker for that layer); returns
        how many of them (distinct ids) are new to at least one layer and stayed there (a
        document older than everything a full layer holds is dropped at once)."""
        per_layer: dict[str, tuple[Layer, dict[str, MemoryCard]]] = {}
        for doc in docs:
            for layer in scope.write_layers(doc) if to is None else scope.layers_of(to):
                per_layer.setdefault(layer.key, (layer, {}))[1].setdefault(doc.id, doc)
        if not per_layer:
            return 0
        added: dict[str, set[str]] = {}  # per layer, as its function's last run found it
        written: dict[str, tuple[Revision | None, list[MemoryCard]]] = {}  # per changed layer, likewise
        epoch = secrets.token_hex(8)
        writer = scope.user or None
        known = {key: self._indexes.known(key) for key in per_layer}

        def merge(layer: Layer, new: dict[str, MemoryCard]) -> UpdateFn:
            def fn(current: JSONValue | None) -> JSONValue | None:
                added[layer.key] = set()
                written.pop(layer.key, None)
                stored = layer_values.Stored(current, known[layer.key])
                existing = stored.cards
                ids = {doc.id for doc in existing}
                fresh = [doc for doc_id, doc in new.items() if doc_id not in ids]
                relined = layer_values.relined(existing, new, scope.lineage) if layer.bound and scope.lineage else None
                existing = existing if relined is None else relined
                writers, newly_written = layer_values.noted_writers(layer, current, new, ids, writer)
                if not fresh and relined is None and layer_values.revision(current) is not None:
                    if writers is None or not newly_written:
                        return current
                    assert isinstance(current, dict)
                    return {**current, "writers": layer_values.writers_json(writers, existing)}  # same docs, same rev
                merged = existing + fresh if layer.bound else superseded(existing, fresh)
                kept = layer_values.capped(merged, self._cap)
                survivors = {doc.id for doc in kept}
                added[layer.key] = {doc.id for doc in fresh if doc.id in survivors}
                value = layer_values.layer_value(layer, current, kept, epoch, writers, stored)
                written[layer.key] = (layer_values.revision(value), kept)
                return value

            return fn

        updates: dict[str, UpdateFn] = {}
        for key, (layer, new) in per_layer.items():
            updates |= layer_values.with_version(key, merge(layer, new))
            if layer.kind == "scope" and writer is not None:
                marker = writer_marker_key(scope.tenant, writer, layer.ident)
                updates[marker] = layer_values.constant({"user": writer, "scope": layer.ident})
        await self._store.update_many(updates)
        await self._indexes.refresh_all(written)
        return len(set().union(*added.values()))

    # -- one user's memories (the admin API) -------------------------------------------------------

    async def _user_layers(self, tenant: str, user: str) -> _UserLayers:
        """One ``keys`` scan of the user's prefix: their session layers and writer markers."""
        in_sessions, in_markers = user_sessions_prefix(tenant, user), writer_markers_prefix(tenant, user)
        sessions: list[str] = []
        scopes: list[tuple[str, str]] = []
        for key in await self._store.keys(user_owned_prefix(tenant, user)):
            if key.startswith(in_sessions) and not is_layer_version_key(key):
                sessions.append(key)
            elif key.startswith(in_markers):
                scopes.append((key, scope_layer_of_marker(tenant, key)))
        return _UserLayers(user_layer_key(tenant, user), tuple(sessions), tuple(scopes))

    async def _user_view(self, tenant: str, user: str) -> list[tuple[LayerKind, list[MemoryCard]]]:
        """The user's documents per layer, broadest first: their user layer, the cards they
        wrote to each scope layer, their session layers."""
        layers = await self._user_layers(tenant, user)
        scope_keys = [layer for _, layer in layers.scopes]
        values = await asyncio.gather(*(self._store.get(key) for key in (layers.user, *scope_keys, *layers.sessions)))
        user_value, scope_values, session_values = (
            values[0],
            values[1 : 1 + len(scope_keys)],
            values[1 + len(scope_keys) :],
        )
        view: list[tuple[LayerKind, list[MemoryCard]]] = [("user", layer_values.cards(user_value))]
        for value in scope_values:
            writers = layer_values.writers_in(value)
            view.append(
                (
                    "scope",
                    [doc for doc in layer_values.cards(value) if user in layer_values.writers_of(writers, doc.id)],
                )
            )
        view += [("session", layer_values.cards(value)) for value in session_values]
        return [(kind, docs) for kind, docs in view if docs]

    async def user_memories(self, tenant: str, user: str) -> list[tuple[LayerKind, MemoryCard]]:
        """Every document ``user``'s requests wrote (see the module docstring), each once, with
        the broadest layer that holds it."""
        seen: set[str] = set()
        out: list[tuple[LayerKind, MemoryCard]] = []
        for kind, docs in await self._user_view(tenant, user):
            for doc in docs:
                if doc.id not in seen:
                    seen.add(doc.id)
                    out.append((kind, doc))
        return out

    async def search_user(self, tenant: str, user: str, query: str, top_k: int) -> list[Hit]:
        """``search`` over ``user_memories`` (each layer indexed on the spot: the admin API's
        searches must not push the requests' layers out of the cache)."""
        if top_k <= 0 or not query.strip():
            return []
        return self.search_view(await self._user_view(tenant, user), query, top_k)

    def search_view(self, view: Sequence[tuple[LayerKind, Sequence[MemoryCard]]], query: str, top_k: int) -> list[Hit]:
        """``search`` over documents read for an operator (each layer indexed on the spot, not cached)."""
        indexes = [(kind, LayerIndex.build(docs, self._params)) for kind, docs in view]
        return search_layers(query, indexes, top_k, params=self._params)

    async def delete_user_memories(self, tenant: str, user: str, ids: Collection[str] | None = None) -> int:
        """Delete the documents ``ids`` (None: all) among ``user``'s memories: from their user
        and session layers, and their cards in scope layers as the module docstring says.
        Returns how many distinct documents the user no longer has."""
        wanted = None if ids is None else set(ids)
        if wanted is not None and not wanted:
            return 0
        layers = await self._user_layers(tenant, user)
        removed = layer_values.Removed()
        own = [layers.user, *layers.sessions]
        if wanted is not None:  # rewrite only the layers that hold one of them
            values = await asyncio.gather(*(self._store.get(key) for key in own))
            own = [
                key
                for key, value in zip(own, values, strict=True)
                if any(d.id in wanted for d in layer_values.cards(value))
            ]
        for start in range(0, len(own), DELETE_BATCH):
            updates: dict[str, UpdateFn] = {}
            for key in own[start : start + DELETE_BATCH]:
                updates |= layer_values.with_version(key, layer_values.strip(wanted, removed))
            await self._store.update_many(updates)
        for marker, layer_key in layers.scopes:
            disown, unmark = layer_values.disown(user, wanted, removed)
            await self._store.update_many({**layer_values.with_version(layer_key, disown), marker: unmark})
        return len(removed)

    # -- reading -------------------------------------------------------------------------------

    async def list_layer(self, layer: Layer) -> list[MemoryCard]:
        """The layer's documents, oldest first."""
        return layer_values.cards(await self._store.get(layer.key))

    async def newest(self, layer: Layer, n: int) -> list[MemoryCard]:
        """The newest ``n`` cards of a layer, from its cached index (none of a lineage-bound one)."""
        if layer.bound or n <= 0:
            return []
        index = await self._index(layer.key, (await self._versions([layer]))[0])
        return [doc for doc in index.docs.values() if doc.kind == "card"][-n:]

    async def search(
        self,
        scope: MemoryScope,
        query: str,
        top_k: int,
        *,
        kinds: Collection[DocKind] | None = None,
        query_vector: Sequence[float] | None = None,
    ) -> list[Hit]:
        """The ``top_k`` best documents of the scope's layers (``docs.search_layers``) that the
        request may read."""
        return await self.search_layers(
            scope.read_layers(), query, top_k, kinds=kinds, query_vector=query_vector, reader=scope.lineage
        )

    async def search_layers(
        self,
        layers: Sequence[Layer],
        query: str,
        top_k: int,
        *,
        kinds: Collection[DocKind] | None = None,
        query_vector: Sequence[float] | None = None,
        reader: PrefixChain | None = None,
    ) -> list[Hit]:
        """``search`` over the given layers (broadest first); of a lineage-bound layer, only the
        documents whose lineage ``reader`` (the request's chain) extends."""
        if top_k <= 0 or not layers or not query.strip():
            return []
        versions = await self._versions(layers)
        found = await asyncio.gather(
            *(self._readable(layer, v, reader) for layer, v in zip(layers, versions, strict=True))
        )
        asked = Asked(query, top_k, frozenset(kinds) if kinds is not None else None, query_vector)
        parts = [(layer.kind, part) for layer, (_, part) in zip(layers, found, strict=True)]
        known = self._searches.get(parts, asked)
        if known is not None:
            return known
        kinds_indexes = [(layer.kind, index) for layer, (index, _) in zip(layers, found, strict=True)]
        hits = search_layers(query, kinds_indexes, top_k, kinds=kinds, query_vector=query_vector, params=self._params)
        self._searches.put(parts, asked, hits)
        return hits

    async def has_docs(self, scope: MemoryScope) -> bool:
        """Whether any of the scope's layers holds a document the request may read (is there
        anything to search?): the version entries say, without reading the layers (a layer
        without one is read); of a lineage-bound layer, its readable documents."""
        layers = scope.read_layers()
        for layer, version in zip(layers, await self._versions(layers), strict=True):
            if version is not None and version[2] == 0:
                continue
            if layer.bound:
                if readable_ids(await self._index(layer.key, version), scope.lineage):
                    return True
            elif version is not None or layer_values.raw_docs(await self._store.get(layer.key)):
                return True
        return False

    async def present(self, scope: MemoryScope, ids: Collection[str]) -> frozenset[str]:
        """Which of the documents ``ids`` the request may still read (a deleted one it may not)."""
        if not ids:
            return frozenset()
        layers = scope.read_layers()
        versions = await self._versions(layers)
        found = await asyncio.gather(
            *(self._readable(layer, v, scope.lineage) for layer, v in zip(layers, versions, strict=True))
        )
        return frozenset(doc_id for doc_id in ids if any(doc_id in index.docs for index, _ in found))

    async def _versions(self, layers: Sequence[Layer]) -> list[tuple[str, int, int] | None]:
        values = await asyncio.gather(*(self._store.get(layer_version_key(layer.key)) for layer in layers))
        return [layer_values.version_entry(value) for value in values]

    async def _readable(
        self, layer: Layer, version: tuple[str, int, int] | None, reader: PrefixChain | None
    ) -> tuple[LayerIndex, Part]:
        """The layer's index, or of a lineage-bound layer the index of what ``reader`` may read
        (``readable_memo``); and what it is, for the search memo. An index is told apart only
        when it is the one cached at the version entry's revision, not one read past it."""
        index = await self._index(layer.key, version)
        revision = version[:2] if version is not None else None
        if not layer.bound:
            known = revision is not None and self._indexes.current(layer.key, revision) is index
            return index, (layer.key, revision, "") if known and revision is not None else None
        if reader is None:
            return LayerIndex(), None  # no reader reads none of it
        return self._readers.part(self._indexes, layer.key, revision, index, reader)

    async def _index(self, key: str, version: tuple[str, int, int] | None) -> LayerIndex:
        """The layer's index: the cached one when its version is current, else read and indexed
        (``index_cache``)."""
        found = self._indexes.current(key, version[:2] if version is not None else None)
        if found is not None:
            return found
        # What was read may be newer than the version entry: it is cached under its own version.
        value = await self._store.get(key)
        return self._indexes.index(key, layer_values.revision(value), layer_values.cards(value))

    @property
    def cache_info(self) -> tuple[int, int | None]:
        """(cached layer indexes, most layers kept): for tests and the bench."""
        return len(self._cache), self._cache.max_entries

    @property
    def cache_bytes(self) -> int:
        return self._cache.nbytes

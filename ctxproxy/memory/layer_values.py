"""A memory layer's stored value and the pure transforms ``MemoryStore`` applies to it.

The value of one layer (``scopes.Layer.key``)::

    {"kind": "session", "ident": "<raw id>", "owner": "<user>", "epoch": "<random hex>", "rev": 7,
     "texts": ["<doc JSON>", ...], "writers": {"<doc id>": ["alice", null], ...}}

Each document is held as its own JSON text (``MemoryCard.to_json``, serialised), oldest first:
parsing the value makes one string per document instead of a dozen objects, and a write
serialises only the documents it adds or changes, reusing the text of every other one
(``Stored``). A value written before holds its documents as objects under ``docs``; they read
after the ``texts`` (a writer of that layout kept ``texts`` as it found it and wrote its own
documents, newer, under ``docs``), and the next write moves them all to ``texts``.

Its version entry (``ctxproxy.store.keys.layer_version_key`` → ``{"epoch", "rev", "count"}``).
Every function here reads or builds such values, or returns the ``UpdateFn``s that
``MemoryStore`` hands to one atomic ``Store.update_many``; none does I/O. A value that is not a
layer, and documents in it that are not documents, read as absent.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import orjson

from ctxproxy.memory.cards import MemoryCard
from ctxproxy.memory.scopes import Layer
from ctxproxy.session.digest import PrefixChain
from ctxproxy.session.lineage import merged
from ctxproxy.store.base import JSONValue, UpdateFn
from ctxproxy.store.keys import layer_version_key

__all__ = [
    "Known",
    "Removed",
    "Stored",
    "Writers",
    "capped",
    "cards",
    "constant",
    "disown",
    "layer_value",
    "raw_docs",
    "relined",
    "rewritten",
    "strip",
    "revision",
    "version_entry",
    "with_version",
    "writers_in",
    "writers_json",
    "writers_of",
]

Writers = dict[str, list[str | None]]
Known = tuple[tuple[str, int], Sequence[MemoryCard]]  # a revision and its documents, in order


def with_version(key: str, fn: UpdateFn) -> dict[str, UpdateFn]:
    """``fn`` on the layer and, in the same atomic ``update_many`` (which applies its functions
    in order), the layer's version entry set from what ``fn`` produced."""
    produced: dict[str, JSONValue | None] = {}

    def layer(current: JSONValue | None) -> JSONValue | None:
        new = fn(current)
        version = revision(new)
        produced["v"] = {"epoch": version[0], "rev": version[1], "count": len(raw_docs(new))} if version else None
        return new

    def version(current: JSONValue | None) -> JSONValue | None:
        return produced["v"]

    return {key: layer, layer_version_key(key): version}


def raw_docs(value: JSONValue | None) -> list[Any]:
    """The stored items of a layer's documents, in order: its ``texts``, then its ``docs``."""
    if not isinstance(value, dict):
        return []
    texts, docs = value.get("texts"), value.get("docs")
    texts, docs = texts if isinstance(texts, list) else [], docs if isinstance(docs, list) else []
    return texts + docs if docs else texts


def _card(item: Any) -> MemoryCard | None:
    """The document a stored item describes: a JSON text (or, as written before, an object)."""
    if isinstance(item, str):
        try:
            item = orjson.loads(item)
        except orjson.JSONDecodeError:
            return None
    return MemoryCard.from_json(item)


class Stored:
    """A layer value's documents and the JSON text each is stored as, for a write to reuse: the
    text of a document is taken only for that very object (read here, or the cached index's),
    never for a changed copy of it."""

    def __init__(self, value: JSONValue | None, known: Known | None = None) -> None:
        """``known``: a revision and the documents it holds (a cached index's), taken as they are
        when ``value`` is that revision with as many documents (every one valid and distinct, as
        an index holds them) instead of parsing every document again."""
        raw = raw_docs(value)
        if known is not None and known[0] == revision(value) and len(known[1]) == len(raw):
            pairs = list(zip(known[1], raw, strict=True))
        else:
            pairs = [(card, item) for item in raw if (card := _card(item)) is not None]
        self.cards = [card for card, _ in pairs]
        self._texts = {id(card): (card, item) for card, item in pairs if isinstance(item, str)}

    def text(self, doc: MemoryCard) -> str:
        """``doc``'s JSON text: the stored one when ``doc`` is a document read here, else made."""
        found = self._texts.get(id(doc))
        if found is not None and found[0] is doc:
            return found[1]
        return _text(doc)


def _text(doc: MemoryCard) -> str:
    """``doc`` serialised as a stored item (``MemoryCard.to_json`` as a JSON text)."""
    return orjson.dumps(doc.to_json()).decode()


def cards(value: JSONValue | None, known: Known | None = None) -> list[MemoryCard]:
    """The documents of a layer value (``Stored``)."""
    return Stored(value, known).cards


def revision(value: JSONValue | None) -> tuple[str, int] | None:
    """``(epoch, rev)`` of a layer value, or None when it has none (not cacheable)."""
    if not isinstance(value, dict):
        return None
    epoch, rev = value.get("epoch"), value.get("rev")
    if isinstance(epoch, str) and isinstance(rev, int) and not isinstance(rev, bool):
        return epoch, rev
    return None


def version_entry(value: JSONValue | None) -> tuple[str, int, int] | None:
    """``(epoch, rev, count)`` of a version entry, or None."""
    if not isinstance(value, dict):
        return None
    epoch, rev, count = value.get("epoch"), value.get("rev"), value.get("count")
    if isinstance(epoch, str) and all(isinstance(v, int) and not isinstance(v, bool) for v in (rev, count)):
        return epoch, int(rev), int(count)  # type: ignore[arg-type]
    return None


def noted_writers(
    layer: Layer, current: JSONValue | None, new: Mapping[str, MemoryCard], known: set[str], writer: str | None
) -> tuple[Writers | None, bool]:
    """A scope layer's writers with ``writer`` noted for every card of ``new`` (a card already
    there before writers were recorded counts an unknown writer first), and whether that added
    anyone; (None, False) for a layer of another kind."""
    if layer.kind != "scope":
        return None, False
    writers = writers_in(current)
    newly_written = False
    for doc_id in new:
        names = writers.setdefault(doc_id, [None] if doc_id in known else [])
        if writer not in names:
            names.append(writer)
            newly_written = True
    return writers, newly_written


def writers_in(value: JSONValue | None) -> Writers:
    """A scope layer's ``writers`` (doc id → user names, None for an unnamed writer)."""
    raw = value.get("writers") if isinstance(value, dict) else None
    if not isinstance(raw, dict):
        return {}
    return {
        doc_id: [w for w in names if w is None or isinstance(w, str)]
        for doc_id, names in raw.items()
        if isinstance(names, list)
    }


def writers_of(writers: Writers, doc_id: str) -> list[str | None]:
    """Who wrote the card; a card without a record was written by someone we cannot name."""
    return writers.get(doc_id, [None])


def writers_json(writers: Writers, docs: Iterable[MemoryCard]) -> dict[str, Any]:
    return {doc.id: list(writers_of(writers, doc.id)) for doc in docs}


def rewritten(
    previous: JSONValue | None,
    docs: list[MemoryCard],
    epoch: str,
    writers: Writers | None,
    stored: Stored | None = None,
) -> dict[str, Any]:
    """``previous`` (kind, ident, owner kept) holding ``docs`` instead, one revision on; ``writers``
    for scope layers (None: the layer has none); ``stored``: the texts of ``previous``'s
    documents, reused for those of ``docs`` that are the documents read there."""
    version = revision(previous)
    out: dict[str, Any] = dict(previous) if isinstance(previous, dict) else {}
    out.pop("docs", None)
    text = stored.text if stored is not None else _text
    out |= {
        "epoch": version[0] if version else epoch,
        "rev": version[1] + 1 if version else 1,
        "texts": [text(doc) for doc in docs],
    }
    if writers is not None:
        out["writers"] = writers_json(writers, docs)
    return out


def layer_value(
    layer: Layer,
    previous: JSONValue | None,
    docs: list[MemoryCard],
    epoch: str,
    writers: Writers | None = None,
    stored: Stored | None = None,
) -> JSONValue:
    if layer.kind == "scope" and writers is None:
        writers = writers_in(previous)
    value = rewritten(previous, docs, epoch, writers if layer.kind == "scope" else None, stored)
    value |= {"kind": layer.kind, "ident": layer.ident}
    if layer.owner is not None:
        value["owner"] = layer.owner
    return value


def capped(docs: list[MemoryCard], cap: int) -> list[MemoryCard]:
    """The newest ``cap`` documents, in their stored order (oldest dropped; ties: earlier stored)."""
    if len(docs) <= cap:
        return docs
    order = sorted(range(len(docs)), key=lambda i: (docs[i].created_at, i))
    dropped = set(order[: len(docs) - cap])
    return [doc for i, doc in enumerate(docs) if i not in dropped]


def relined(existing: list[MemoryCard], new: Mapping[str, MemoryCard], writer: PrefixChain) -> list[MemoryCard] | None:
    """A lineage-bound layer's ``existing`` documents after ``writer`` wrote ``new`` (by id) again:
    each one it rewrote with the lineages merged (``ctxproxy.session.lineage.merged``), in place;
    None when no lineage changed."""
    out: list[MemoryCard] = []
    changed = False
    for doc in existing:
        again = new.get(doc.id)
        lineage = merged(doc.lineage, again.lineage, writer) if again is not None else doc.lineage
        changed = changed or lineage != doc.lineage
        out.append(doc if lineage == doc.lineage else replace(doc, lineage=lineage))
    return out if changed else None


def constant(value: JSONValue) -> UpdateFn:
    return lambda _current: value


class Removed:
    """The ids of the documents some update functions removed. Each function reports through its
    own ``slot``, and only its last run counts: a store may run a function again when another
    writer changed the value meanwhile (``Store.update``)."""

    def __init__(self) -> None:
        self._by_slot: list[frozenset[str]] = []

    def slot(self) -> Callable[[Iterable[str]], None]:
        index = len(self._by_slot)
        self._by_slot.append(frozenset())

        def record(ids: Iterable[str]) -> None:
            self._by_slot[index] = frozenset(ids)

        return record

    def __len__(self) -> int:
        return len(frozenset().union(*self._by_slot))


def strip(wanted: set[str] | None, removed: Removed) -> UpdateFn:
    """Drops the documents ``wanted`` (None: all) from one of a user's own layers, reporting their
    ids to ``removed``; an emptied layer is removed."""
    record = removed.slot()

    def fn(current: JSONValue | None) -> JSONValue | None:
        stored = Stored(current)
        docs = stored.cards
        kept = [doc for doc in docs if wanted is not None and doc.id not in wanted]
        record(doc.id for doc in docs if wanted is None or doc.id in wanted)
        if len(kept) == len(docs):
            return current
        return rewritten(current, kept, secrets.token_hex(8), None, stored) if kept else None

    return fn


def disown(user: str, wanted: set[str] | None, removed: Removed) -> tuple[UpdateFn, UpdateFn]:
    """For a scope layer and the user's writer marker of it, in this order: take ``user`` off
    the writers of their cards ``wanted`` (None: all), reporting those ids to ``removed`` (a card
    left without writers is dropped); then drop the marker unless the user still wrote a card
    there."""
    remains = [False]  # set by each run of ``layer``, read by the ``marker`` run after it
    record = removed.slot()

    def marker(current: JSONValue | None) -> JSONValue | None:
        return current if remains[0] else None

    def layer(current: JSONValue | None) -> JSONValue | None:
        stored = Stored(current)
        docs = stored.cards
        writers = writers_in(current)
        kept: list[MemoryCard] = []
        gone: set[str] = set()
        for doc in docs:
            names = writers_of(writers, doc.id)
            if user in names and (wanted is None or doc.id in wanted):
                gone.add(doc.id)
                names = writers[doc.id] = [name for name in names if name != user]
                if not names:
                    continue
            kept.append(doc)
        record(gone)
        remains[0] = any(user in writers_of(writers, doc.id) for doc in kept)
        if not isinstance(current, dict) or writers == writers_in(current):
            return current
        if not kept:
            return None
        if len(kept) == len(docs):
            return {**current, "writers": writers_json(writers, kept)}  # same docs, same rev
        return rewritten(current, kept, secrets.token_hex(8), writers, stored)

    return layer, marker

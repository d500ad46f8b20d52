"""What of a lineage-bound layer one request may read (``ctxproxy.memory.memories``), and where
the index of that part is cached."""

from __future__ import annotations

import hashlib
from collections.abc import Collection

from ctxproxy.memory.docs import LayerIndex
from ctxproxy.session.digest import PrefixChain
from ctxproxy.session.lineage import visible

__all__ = ["readable_ids", "view_key"]


def readable_ids(index: LayerIndex, reader: PrefixChain | None) -> frozenset[str]:
    """The documents of a lineage-bound layer's index that ``reader`` may read (none without one)."""
    if reader is None:
        return frozenset()
    groups = list(index.by_lineage.values())  # each lineage checked once, however many documents it has
    found = visible(reader, ((str(i), (lineage,)) for i, lineage in enumerate(index.by_lineage)))
    return frozenset(doc_id for i in found for doc_id in groups[int(i)])


def view_key(layer_key: str, ids: Collection[str]) -> str:
    """Where the index of part of a layer (the documents ``ids``) is cached."""
    digest = hashlib.blake2b("\n".join(sorted(ids)).encode(), digest_size=16).hexdigest()
    return f"{layer_key}#view:{digest}"

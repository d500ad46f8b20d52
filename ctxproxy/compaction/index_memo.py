"""A session's checkpoint index as this process decoded it last, taken again while the Store
hands back the same bytes.

A request of a session with a checkpoint reads its index from the Store every time: another
replica (a Redis store), another process on the directory, a ``forget``, a refusal or a
compaction may have written it since, and that read is the check — never skipped, so a replica
never acts on a stale checkpoint. What the read makes unnecessary is decoding it again: the value
read is encoded back (``orjson``, ~3 µs for the 39 KB index of a ``none`` session at ~3,000
messages, against ~100 µs to decode its checkpoints) and compared with the bytes of the value
decoded last; equal bytes are the same index — JSON's ``1``, ``1.0`` and ``true`` kept apart, as
the decoding keeps them — so the objects decoded then, with what strategies decoded from them
(``Checkpoint.decoded``), stand for it. Bytes that differ in anything (a key reordered too)
are decoded afresh. A pure cache: losing an entry costs a decode, never correctness.

Entries go in the ``checkpoints`` share beside ``CheckpointMemo``'s, under ``("index", session)``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import orjson

from ctxproxy.cache import ByteLRU
from ctxproxy.compaction.checkpoint_memo import BYTES_PER_JSON_BYTE
from ctxproxy.compaction.checkpoints import SessionIndex
from ctxproxy.store import JSONValue

__all__ = ["IndexMemo"]


class IndexMemo:
    def __init__(self, cache: ByteLRU[Hashable, Any]) -> None:
        self._entries = cache

    def decoded(
        self, session: str, value: JSONValue | None, decode: Callable[[JSONValue | None], SessionIndex]
    ) -> SessionIndex:
        """``decode(value)`` — or, when ``value`` is what ``session``'s index held when it was
        decoded last, byte for byte, what that gave."""
        if value is None:
            return decode(value)
        stored = orjson.dumps(value)
        key = ("index", session)
        known: tuple[bytes, SessionIndex] | None = self._entries.get(key)
        if known is not None and known[0] == stored:
            return known[1]
        index = decode(value)
        self._entries.put(key, (stored, index), len(stored) * (1 + BYTES_PER_JSON_BYTE))
        return index

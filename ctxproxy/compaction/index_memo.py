"""A session's checkpoint index as this process decoded it last, taken again while the Store
hands back the same bytes.

A request of a session with a checkpoint reads its index from the Store every time: another
replica (a Redis store), another process on the directory, a ``forget``, a refusal or a
compaction may have written it since, and that read is the check — never skipped, so a replica
never acts on a stale checkpoint. What the read makes unnecessary is parsing and decoding it
again: the index is read as the bytes the Store holds (``Store.get_bytes``) and compared with
the bytes decoded last (a ``memcmp`` of 39 KB for a ``none`` session at ~3,000 messages, against
~25 µs to parse them and ~100 µs to decode their checkpoints); equal bytes are the same index, so
the objects decoded then, with what strategies decoded from them (``Checkpoint.decoded``), stand
for it. Bytes that differ in anything (a key reordered too) are parsed and decoded afresh, and
bytes that are not JSON read as no index (reported as corrupt at every read, as ``Store.get``
reports them). A pure cache: losing an entry costs a decode, never correctness.

Entries go in the ``checkpoints`` share beside ``CheckpointMemo``'s, under ``("index", session)``,
accounted as what they hold: the bytes, and the parsed value's objects (``json_size``), which
the decoded index keeps (its checkpoints hold the states, blocks' texts and lineages as parsed;
``tests/compaction/test_index_memo.py`` measures it). A ``paged`` index holds each archive index
as one string, so the walk is short and the entry about twice its bytes (~1.9 MB at ~3,000
messages), where a fixed factor for indexes of small objects kept it out of the cache. What a
strategy decodes from a checkpoint (``Checkpoint.decoded``) is not in that account, so only the
newest checkpoint — ``CheckpointMemo``'s, accounted there — is handed out as the object held;
each other one that has a state is handed out as a copy of it, whose decodings go with the
request (a request of a fork that goes on from an older checkpoint decodes it again, as it did
whenever the index was not cached).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any

from ctxproxy.cache import ByteLRU, json_size
from ctxproxy.compaction.checkpoints import SessionIndex
from ctxproxy.store import JSONValue
from ctxproxy.store.values import decode as parsed

__all__ = ["IndexMemo"]


class IndexMemo:
    def __init__(self, cache: ByteLRU[Hashable, Any]) -> None:
        self._entries = cache

    def decoded(
        self, session: str, key: str, stored: bytes | None, decode: Callable[[JSONValue | None], SessionIndex]
    ) -> SessionIndex:
        """``decode`` of the value of ``stored`` (the bytes read under ``key``) — or, when they are
        the bytes ``session``'s index held when it was decoded last, what that gave."""
        known: tuple[bytes, SessionIndex] | None = self._entries.get(("index", session))
        if stored is not None and known is not None and known[0] == stored:
            return _handed(known[1])
        value = None if stored is None else parsed(key, stored)
        index = decode(value)
        if stored is not None and value is not None:
            self._entries.put(("index", session), (stored, index), len(stored) + json_size(value))
        return _handed(index)


def _handed(index: SessionIndex) -> SessionIndex:
    """``index`` as a request gets it: the newest checkpoint (by end, as ``CheckpointMemo`` picks
    it) itself, each other one with a state a copy without its decodings (module docstring)."""
    if len(index.checkpoints) < 2:
        return index
    newest = max(index.checkpoints, key=lambda c: c.end)
    return replace(index, checkpoints=[c if c is newest or not c.state else replace(c) for c in index.checkpoints])

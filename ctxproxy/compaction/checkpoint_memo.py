"""The checkpoints this process read last, kept so that what a strategy decodes from one
(``Checkpoint.decoded``: ``paged``'s archive index of 1,700 entries at ~3,000 messages) is
decoded once per checkpoint, not once per request.

The Store hands back a fresh value at every read. A session's longest checkpoint read again is
replaced by the one read before when the two are equal — every field, ``state`` included,
compared in C, a fraction of what decoding the state costs — so the earlier object, with what
was decoded from it, stands for it. A checkpoint that differs in anything is a new one. A pure
cache: losing an entry costs a decode, never correctness, and nothing of another replica's
writes can make an entry stale, since an entry is used only for a checkpoint equal to it. One
checkpoint per session, bounded by the bytes of the states it holds (``ctxproxy.cache``: its
share ``checkpoints``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import orjson

from ctxproxy.cache import ByteLRU, CachePool
from ctxproxy.strategies.base import Checkpoint

__all__ = ["BYTES_PER_JSON_BYTE", "CheckpointMemo"]

# What a checkpoint costs held, by the length of its state's JSON: CPython's objects for the
# small dicts of an archive index take about 8 bytes per byte of JSON (``json_size``, which
# would walk each of their objects: 8 ms for one of 1,700 entries), and its decoded index about
# half as much again.
BYTES_PER_JSON_BYTE = 12


class CheckpointMemo:
    def __init__(self, cache: ByteLRU[Hashable, Any] | None = None) -> None:
        self._entries = cache if cache is not None else CachePool().lru("checkpoints")

    def made(self, session: str, checkpoint: Checkpoint) -> None:
        """``checkpoint`` was made for ``session`` and saved: the next read finds it, with what
        this request decoded from it."""
        self._put(session, checkpoint)

    def settled(self, session: str, read: Sequence[Checkpoint]) -> list[Checkpoint]:
        """``read`` (the checkpoints of ``session``'s index, as the Store handed them back) with
        the longest — the one a request that goes on from the previous one uses — replaced by the
        equal checkpoint read before, when there was one, else kept for the next read. One per
        session: the index holds several, and an LRU that took them all would drop each before
        it was read again."""
        if not read:
            return []
        newest = max(read, key=lambda c: c.end)
        known: Checkpoint | None = self._entries.get(session)
        if known is None or known != newest:
            self._put(session, newest)
            return list(read)
        return [known if checkpoint is newest else checkpoint for checkpoint in read]

    def _put(self, session: str, checkpoint: Checkpoint) -> None:
        size = len(orjson.dumps(checkpoint.state)) + sum(len(block.text) for block in checkpoint.blocks)
        self._entries.put(session, checkpoint, size * BYTES_PER_JSON_BYTE)

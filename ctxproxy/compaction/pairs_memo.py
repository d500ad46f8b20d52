"""``breaks_tool_pairs`` for a session's requests one after the other, scanning only what the
previous request's lists did not hold.

Assembling checks at every request that what is forwarded pairs every tool call with its
result as the client's list did (``assemble.breaks_tool_pairs``): a scan of the forwarded list,
and of the client's whole list when the forwarded one has a call or result unpaired. Between
two compactions a session's forwarded list grows by the new messages only — the head, the
summary and the kept messages before are the same — so the scan goes on from where the
previous request's ended (``assemble.ToolPairs``: the calls still open and the results that
answered none, as a scan leaves them) when the new list starts with the previous one, which is
compared in C, element by element (the very objects, for the messages a body repeats). Any
other list is scanned from its start. Entries hold the list scanned — the request's own message
objects, which the known conversation keeps, and the summary messages — and what its scan left,
per session, under ``("pairs", which, session)`` in the ``checkpoints`` share; a pure cache.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxproxy.cache import ByteLRU
from ctxproxy.compaction.assemble import ToolPairs, breaks_pairing
from ctxproxy.strategies.base import Message

__all__ = ["ToolPairsMemo"]

_ID_BYTES = sys.getsizeof("call_" + "0" * 24)  # a tool call id, about


@dataclass(frozen=True)
class _Scanned:
    messages: list[Message]
    pairs: ToolPairs


class ToolPairsMemo:
    def __init__(self, cache: ByteLRU[Hashable, Any]) -> None:
        self._entries = cache

    def breaks(self, session: str, original: Sequence[Message], forwarded: Sequence[Message]) -> bool:
        """``breaks_tool_pairs(original, forwarded)``, going on from ``session``'s previous scans."""
        after = self._scan(("pairs", "forwarded", session), forwarded)
        if after.paired:
            return False  # the usual case: no need to scan the original
        return breaks_pairing(self._scan(("pairs", "original", session), original), after)

    def _scan(self, key: Hashable, messages: Sequence[Message]) -> ToolPairs:
        seen: _Scanned | None = self._entries.get(key)
        n = len(seen.messages) if seen is not None else 0
        if seen is not None and n <= len(messages) and messages[:n] == seen.messages:
            pairs = seen.pairs.then(messages[n:])
        else:
            pairs = ToolPairs().then(messages)
        held = list(messages)
        ids = len(pairs.open_calls) + len(pairs.orphans)
        self._entries.put(key, _Scanned(held, pairs), sys.getsizeof(held) + ids * _ID_BYTES)
        return pairs

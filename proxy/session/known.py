"""What this process already knows about recent conversations, so a request only hashes,
checks and counts the messages it has not seen.

Clients resend the whole history: request n+1 is request n plus an answer and a question. For
each recent session we keep the last request's message list with its digests and token counts.
When a new request's messages start with that list (list equality, compared in C), those
digests and counts are reused and only the tail is processed.

A pure cache in process memory: losing it (a restart, another replica, eviction) costs time,
never correctness. It is bounded by the total number of messages it holds.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Known:
    messages: list[dict[str, Any]]
    digests: tuple[bytes, ...]
    tokens: tuple[int, ...]
    encoding: str


class KnownConversations:
    def __init__(self, max_messages: int = 250_000) -> None:
        self._max_messages = max_messages
        self._entries: OrderedDict[str, Known] = OrderedDict()
        self._size = 0

    def prefix(self, session: str, messages: Sequence[dict[str, Any]]) -> tuple[Known, int] | None:
        """The remembered request of ``session`` and how many of its leading messages
        ``messages`` repeats: all of them (the conversation went on), or all but the last
        (the last question was edited or regenerated)."""
        known = self._entries.get(session)
        if known is None:
            return None
        for n in (len(known.messages), len(known.messages) - 1):
            if 0 < n <= len(messages) and messages[:n] == known.messages[:n]:
                self._entries.move_to_end(session)
                return known, n
        return None

    def remember(self, session: str, known: Known) -> None:
        old = self._entries.pop(session, None)
        if old is not None:
            self._size -= len(old.messages)
        if len(known.messages) > self._max_messages:
            return
        self._entries[session] = known
        self._size += len(known.messages)
        while self._size > self._max_messages:
            _, evicted = self._entries.popitem(last=False)
            self._size -= len(evicted.messages)

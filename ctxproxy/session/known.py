"""What this process already knows about recent conversations, so a request only hashes,
checks and counts the messages it has not seen.

Clients resend the whole history: request n+1 is request n plus an answer and a question. For
each recent session we keep the last request's message list with its digests and token counts.
When a new request's messages start with that list (list equality, compared in C), those
digests and counts are reused and only the tail is processed.

A pure cache in process memory: losing it (a restart, another replica, eviction) costs time,
never correctness. Nor can another replica make it stale: what is kept is derived from the
messages alone (their digests and counts), and an entry is used only for the messages a request
repeats exactly, so whatever happened to the conversation elsewhere meanwhile (it went on at
another replica, was edited, forked) a request is checked against its own messages: they are the
entry's version stamp. Nothing here is read from or derived from the Store. It is bounded by the
bytes its entries hold (``ctxproxy.cache``): each message's parsed JSON, measured once when the
message is new, plus the digests and counts.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxproxy.cache import ByteLRU, CachePool, json_size
from ctxproxy.session.digest import PrefixChain

_DIGEST_BYTES = sys.getsizeof(bytes(16))
_COUNT_BYTES = sys.getsizeof(2**20)  # a token or byte count above the small-int cache
_HASH_STATE_BYTES = 256  # a sha256 state (``PrefixChain.whole``), about


@dataclass(frozen=True)
class Known:
    messages: list[dict[str, Any]]
    digests: tuple[bytes, ...]
    tokens: tuple[int, ...]
    encoding: str
    sizes: tuple[int, ...]  # json_size of each message
    owner: str | None = None  # whose request it was (``session.fork.owner_of``)
    systems: tuple[int, ...] = ()  # where its system messages are (``strategies.base.system_positions``)
    tool_at: int | None = None  # where its first tool result is (None: it has none)
    chain: PrefixChain | None = None  # its digests as hashed (``PrefixChain.hashed``): the next request hashes on

    @property
    def nbytes(self) -> int:
        """What holding this request costs: its messages, their digests, counts and sizes, its owner."""
        n = len(self.messages)
        containers = sum(sys.getsizeof(c) for c in (self.messages, self.digests, self.tokens, self.sizes, self.owner))
        return sum(self.sizes) + containers + n * (_DIGEST_BYTES + 2 * _COUNT_BYTES) + _HASH_STATE_BYTES


def message_sizes(messages: Sequence[dict[str, Any]], seen: Known | None, reused: int) -> tuple[int, ...]:
    """Each message's ``json_size``: the first ``reused`` from ``seen``, the rest measured."""
    head = seen.sizes[:reused] if seen is not None else ()
    return head + tuple(json_size(m) for m in messages[len(head) :])


class KnownConversations:
    def __init__(self, cache: ByteLRU[str, Known] | None = None) -> None:
        self._entries = cache if cache is not None else CachePool().lru("known_conversations")

    @property
    def nbytes(self) -> int:
        return self._entries.nbytes

    def last(self, session: str) -> Known | None:
        """The remembered request of ``session``, whatever the next one holds."""
        return self._entries.get(session)

    def prefix(self, session: str, messages: Sequence[dict[str, Any]]) -> tuple[Known, int] | None:
        """The remembered request of ``session`` and how many of its leading messages
        ``messages`` repeats: all of them (the conversation went on), or all but the last
        (the last question was edited or regenerated)."""
        known = self._entries.get(session)
        if known is None:
            return None
        for n in (len(known.messages), len(known.messages) - 1):
            if 0 < n <= len(messages) and messages[:n] == known.messages[:n]:
                return known, n
        return None

    def remember(self, session: str, known: Known) -> None:
        """Keep ``known`` as the session's last request (a request over the whole budget is
        not kept, and the session's older one is dropped)."""
        self._entries.put(session, known, known.nbytes + sys.getsizeof(session))

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
from ctxproxy.session.digest import DIGEST_SIZE, PrefixChain
from ctxproxy.session.identity import SessionKey

_DIGEST_BYTES = sys.getsizeof(bytes(16))
_COUNT_BYTES = sys.getsizeof(2**20)  # a token or byte count above the small-int cache
_HASH_STATE_BYTES = 256  # a sha256 state (``PrefixChain.whole``), about
NAMED = 4096  # conversations whose session is known by their first message object (``named``), then anew


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
    key: SessionKey | None = None  # the session it was identified as
    anchor: int = 0  # how many leading messages named it, through the first user message (0: not known)
    token_sum: int | None = None  # ``sum(tokens)``, ``sum(sizes)``: when its maker knew them (``went_on``)
    size_sum: int | None = None

    @property
    def nbytes(self) -> int:
        """What holding this request costs: its messages, their digests, counts and sizes, its owner."""
        n = len(self.messages)
        getsizeof = sys.getsizeof
        containers = (
            getsizeof(self.messages)
            + getsizeof(self.digests)
            + getsizeof(self.tokens)
            + getsizeof(self.sizes)
            + getsizeof(self.owner)
        )
        sizes = self.size_sum if self.size_sum is not None else sum(self.sizes)
        # Its chain's state and its digests joined (``PrefixChain.joined``: shared with the
        # session's prompt print, which counts them too).
        chain = _HASH_STATE_BYTES + DIGEST_SIZE * n if self.chain is not None else _HASH_STATE_BYTES
        return sizes + containers + n * (_DIGEST_BYTES + 2 * _COUNT_BYTES) + chain


def went_on(
    before: tuple[int, ...], before_sum: int | None, reused: int, new: tuple[int, ...]
) -> tuple[tuple[int, ...], int]:
    """``before[:reused] + new`` (a request's counts or sizes, the first ``reused`` those of the
    request it repeats, ``before``, whose sum is ``before_sum``; None: not known) and its sum,
    summed from the shorter end (a request repeats most of the last one)."""
    values = before[:reused] + new  # a tuple's whole slice is itself: no copy when it went on
    if before_sum is None or 2 * reused <= len(values):
        return values, sum(values)
    dropped = sum(before[reused:]) if reused < len(before) else 0
    return values, before_sum - dropped + sum(new)


def message_sizes(messages: Sequence[dict[str, Any]]) -> tuple[int, ...]:
    """Each message's ``json_size``."""
    return tuple(map(json_size, messages))


class KnownConversations:
    def __init__(self, cache: ByteLRU[str, Known] | None = None) -> None:
        self._entries = cache if cache is not None else CachePool().lru("known_conversations")
        # (tenant, session header, id of the first message object) → the session a request of
        # that conversation was identified as; checked against the session's entry (``named``).
        self._named: dict[tuple[str, str | None, int], str] = {}

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
        return None if known is None else repeated(known, messages)

    def named(self, tenant: str, header: str | None, messages: Sequence[dict[str, Any]]) -> Known | None:
        """The remembered request whose leading messages, through the first user message (those
        that name the session: ``session.identity``), are ``messages``' very objects, under
        ``tenant`` and the session ``header``: its ``key`` and ``anchor`` digests are this
        request's. A body that repeats the previous one is handed its parsed objects
        (``wire.incremental``); any other finds nothing here."""
        if not messages:
            return None
        session = self._named.get((tenant, header, id(messages[0])))
        known = self._entries.get(session) if session is not None else None
        if known is None or known.key is None or not 0 < known.anchor <= len(messages):
            return None
        for mine, theirs in zip(messages[: known.anchor], known.messages, strict=False):
            if mine is not theirs:
                return None
        return known

    def remember(self, session: str, known: Known) -> None:
        """Keep ``known`` as the session's last request (a request over the whole budget is
        not kept, and the session's older one is dropped)."""
        self._entries.put(session, known, known.nbytes + sys.getsizeof(session))
        if known.key is not None and known.anchor > 0:
            if len(self._named) >= NAMED:
                self._named.clear()
            header = known.key.value if known.key.source == "header" else None
            self._named[(known.key.tenant, header, id(known.messages[0]))] = session


def repeated(known: Known, messages: Sequence[dict[str, Any]]) -> tuple[Known, int] | None:
    """``known`` and how many of its leading messages ``messages`` repeats, as ``prefix`` says."""
    theirs = known.messages
    for n in (len(theirs), len(theirs) - 1):  # a list compared whole is not copied first
        if 0 < n <= len(messages) and _head(messages, n) == _head(theirs, n):
            return known, n
    return None


def _head(messages: Sequence[dict[str, Any]], n: int) -> Sequence[dict[str, Any]]:
    """``messages[:n]``, ``messages`` itself when that is all of it."""
    return messages if n == len(messages) else messages[:n]

"""The prints of each session's last prompts: how much of a prompt repeats the previous one, as a
provider's prompt cache would find it.

Providers cache a prompt's prefix in the order they read it: the tool definitions, then the
system prompt and the messages. A prompt is kept here as its *print*: a digest of its tool
definitions and its messages' digests (``session.digest.message_digest``, ``DIGEST_SIZE`` bytes
each, joined into one ``bytes``). The prefix two prints share is the run of leading messages
whose digests are equal, and none when the tool definitions differ (they come first). A digest
leaves out what is not content (key order, ``cache_control`` markers, a lone text part's
spelling), as the providers' caches do.

Each session keeps two prints of its last request: as the client sent it and as ctxproxy
forwarded it. A pure cache in process memory, bounded by bytes (``ctxproxy.cache``, share
``prompt_prints``): with several replicas behind one store, a request whose session's previous
request went to another replica compares with the last one this replica saw, or with nothing
(a miss reads as nothing shared), and an evicted session likewise.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ctxproxy.cache import ByteLRU, CachePool
from ctxproxy.session.digest import DIGEST_SIZE

__all__ = ["PromptPrint", "PromptPrints", "SessionPrints", "tools_digest"]


def tools_digest(definitions: Sequence[Mapping[str, Any]]) -> bytes:
    """A digest of tool definitions in the order they are sent (b"" for none)."""
    if not definitions:
        return b""
    data = orjson.dumps(list(definitions), option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(data).digest()[:DIGEST_SIZE]


@dataclass(frozen=True)
class PromptPrint:
    tools: bytes  # ``tools_digest`` of the definitions sent
    messages: bytes  # the messages' digests, joined

    @classmethod
    def of(cls, tools: bytes, digests: Sequence[bytes]) -> PromptPrint:
        return cls(tools, b"".join(digests))

    def __len__(self) -> int:
        return len(self.messages) // DIGEST_SIZE

    def shared(self, previous: PromptPrint | None) -> int:
        """How many leading messages this prompt shares with ``previous``: 0 without one or
        when their tool definitions differ. All but the last of the shorter compared first, then
        the last (a prompt that goes on, or replaces its last message, is two comparisons), else
        a binary search; slices compared in C."""
        if previous is None or previous.tools != self.tools:
            return 0
        mine, theirs = self.messages, previous.messages
        n = min(len(mine), len(theirs)) // DIGEST_SIZE
        if n == 0:
            return 0
        view = memoryview(theirs)  # compared in place: no slice of either is copied
        before_last = (n - 1) * DIGEST_SIZE
        if mine.startswith(view[:before_last]):
            return n if mine.startswith(view[before_last : n * DIGEST_SIZE], before_last) else n - 1
        equal, differs = 0, n - 1  # the first ``equal`` messages agree, the first ``differs`` do not
        while differs - equal > 1:
            mid = (equal + differs) // 2
            if mine.startswith(view[: mid * DIGEST_SIZE]):
                equal = mid
            else:
                differs = mid
        return equal

    @property
    def nbytes(self) -> int:
        return sys.getsizeof(self.tools) + sys.getsizeof(self.messages)


@dataclass(frozen=True)
class SessionPrints:
    """A session's last request: as the client sent it, as it was forwarded."""

    sent: PromptPrint
    forwarded: PromptPrint

    @property
    def nbytes(self) -> int:
        return self.sent.nbytes + self.forwarded.nbytes + 2 * sys.getsizeof(self.sent)


class PromptPrints:
    def __init__(self, cache: ByteLRU[str, SessionPrints] | None = None) -> None:
        self._entries = cache if cache is not None else CachePool().lru("prompt_prints")

    @property
    def nbytes(self) -> int:
        return self._entries.nbytes

    def last(self, session: str) -> SessionPrints | None:
        return self._entries.get(session)

    def remember(self, session: str, prints: SessionPrints) -> None:
        self._entries.put(session, prints, prints.nbytes + sys.getsizeof(session))

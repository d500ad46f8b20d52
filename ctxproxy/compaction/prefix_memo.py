"""The prefix hashes a session's previous request computed to match its checkpoints, handed to
the next request when its message list goes on from that one.

Finding the checkpoint a request uses hashes the request's first ``end`` message digests for a
checkpoint ending at ``end`` (``checkpoints.longest_match``): 46 KB of digests, ~50 µs, at
~3,000 messages, at every request. A request whose prefix chain ``extends`` the previous
request's (``PrefixChain.hashed`` found that it repeats all of that one's digests) has the same
prefix hash as it at every length up to that one's, so those are taken from here; only other
lengths are hashed. One entry per session, in the ``checkpoints`` share, under
``("prefix", session)``; a pure cache (losing it costs the hashes).
"""

from __future__ import annotations

import sys
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from ctxproxy.cache import ByteLRU
from ctxproxy.session import PrefixChain

__all__ = ["PrefixHashes", "PrefixMemo"]

_HEX_BYTES = sys.getsizeof("0" * 32) + sys.getsizeof(2**20)  # a prefix hash's hex and its length


@dataclass
class PrefixHashes:
    """``hex(k)``: ``chain.prefix_hash(k).hex()``, from ``known`` (hashes of a chain whose first
    ``known_upto`` digests ``chain`` repeats) where it has it."""

    chain: PrefixChain
    known: dict[int, str] = field(default_factory=dict)
    known_upto: int = 0
    found: dict[int, str] = field(default_factory=dict)

    def hex(self, k: int) -> str:
        found = self.found.get(k)
        if found is None:
            found = self.known.get(k) if k <= self.known_upto else None
            if found is None:
                found = self.chain.prefix_hash(k).hex()
            self.found[k] = found
        return found


@dataclass(frozen=True)
class _Seen:
    token: object  # the chain's (``PrefixChain.token``)
    length: int
    found: dict[int, str]  # what its request hashed, filled in as it does


class PrefixMemo:
    def __init__(self, cache: ByteLRU[Hashable, Any]) -> None:
        self._entries = cache

    def hashes(self, session: str, chain: PrefixChain) -> PrefixHashes:
        """``chain``'s prefix hashes, with those ``session``'s previous chain found when ``chain``
        is that one or goes on from it; the next request of ``session`` gets what these find."""
        key = ("prefix", session)
        seen: _Seen | None = self._entries.get(key)
        hashes = PrefixHashes(chain)
        if seen is not None and (chain.extends is seen.token or chain.token is seen.token):
            hashes.known, hashes.known_upto = seen.found, seen.length
        # Asked for at the ends of a session's checkpoints: at most a few (``checkpoints.KEEP``).
        self._entries.put(key, _Seen(chain.token, len(chain), hashes.found), _HEX_BYTES * 16)
        return hashes

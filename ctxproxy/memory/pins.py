"""What ctxproxy added to a session's prompt, held in process so the next request re-sends it
byte for byte.

Providers cache a prompt's repeated prefix; whatever ctxproxy adds must keep the bytes the
upstream has already seen. Three things are pinned per session and identity (tenant, session,
user, scope):

- **note 002's User and Scope Memory blocks**, which open the prompt right after the system
  prompt. Searched afresh for every request (with its newest user message, while every round
  adds to the layers), they would change the prompt's start every time. So the blocks a request
  found are reused until the summary's first message changes (its first block: ``rounds``
  appends a Session Memory block per compression and leaves the earlier ones as they were, so
  only a fold rewrites it), and are chosen again then, with that request's question. A request
  that found nothing pins that too: blocks that appeared mid-way would move everything after
  the system prompt (a request whose search failed pins nothing: the next one searches again).
- **note 001's carried ``## Relevant Memories`` blocks** (``ctxproxy.memory.carry``).
- **the proxy tools offered** while the session's checkpoint stays the same: the tool list opens
  the prompt, so a tool once offered is offered again until a compaction rather than coming and
  going with the answer to "is there something to find" (``ctxproxy.pipeline.augment``).

In-process only: another replica, or a restart, chooses again — a cache miss, never a wrong
answer (a carried block names the message it follows by its prefix hash).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Hashable

from ctxproxy.cache import ENTRY_BYTES, ByteLRU
from ctxproxy.memory.carry import Carried
from ctxproxy.memory.inject import MemoryBlock
from ctxproxy.memory.scopes import MemoryScope
from ctxproxy.strategies.base import Checkpoint

__all__ = ["SessionPins"]

Blocks = tuple[MemoryBlock, ...]
Who = tuple[str, str, str | None, str | None]


class SessionPins:
    def __init__(self, cache: ByteLRU[Hashable, object]) -> None:
        self._cache = cache

    def layers(self, scope: MemoryScope, checkpoint: Checkpoint | None) -> Blocks | None:
        found = self._cache.get(("layers", _who(scope), _opening(checkpoint)))
        return found if isinstance(found, tuple) else None

    def pin_layers(self, scope: MemoryScope, checkpoint: Checkpoint | None, blocks: Blocks) -> None:
        """Pin ``blocks``, none at all included (see the module docstring)."""
        size = sum(sys.getsizeof(m.text) + 100 for block in blocks for m in block.memories)
        self._cache.put(("layers", _who(scope), _opening(checkpoint)), blocks, ENTRY_BYTES + size)

    def carried(self, scope: MemoryScope) -> Carried | None:
        found = self._cache.get(("carried", _who(scope)))
        return found if isinstance(found, Carried) else None

    def carry(self, scope: MemoryScope, carried: Carried) -> None:
        size = sum(sys.getsizeof(block.text) * 2 + 200 for block in carried.placed)
        self._cache.put(("carried", _who(scope)), carried, ENTRY_BYTES + size)

    def offered(self, scope: MemoryScope, checkpoint: Checkpoint | None) -> frozenset[str]:
        found = self._cache.get(("tools", _who(scope), _at(checkpoint)))
        return found if isinstance(found, frozenset) else frozenset()

    def offer(self, scope: MemoryScope, checkpoint: Checkpoint | None, names: frozenset[str]) -> None:
        if names:
            self._cache.put(("tools", _who(scope), _at(checkpoint)), names, ENTRY_BYTES)


def _who(scope: MemoryScope) -> Who:
    return (scope.tenant, scope.session, scope.user, scope.scope)


def _at(checkpoint: Checkpoint | None) -> tuple[int, str]:
    return (checkpoint.end, checkpoint.prefix_hash) if checkpoint is not None else (0, "")


def _opening(checkpoint: Checkpoint | None) -> tuple[int, int, bytes] | None:
    """The checkpoint's first block, which the summary's first message shows."""
    if checkpoint is None or not checkpoint.blocks:
        return None
    first = checkpoint.blocks[0]
    return (first.start, first.end, hashlib.sha256(first.text.encode("utf-8", "surrogatepass")).digest()[:16])

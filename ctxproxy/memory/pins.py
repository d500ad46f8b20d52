"""Note 002's User and Scope Memory blocks, held for a session between two compressions.

The layered blocks open the prompt, right after the system prompt. Searched afresh for every
request (with its newest user message, while every round adds to the layers), they would change
the prompt's start every time, and no provider cache would ever hit — against the rule every
strategy keeps: between two compactions, consecutive requests of a session send the same prefix
bytes. So the blocks a request found are *pinned* to its session, identity and checkpoint (the
Session Memory it is forwarded with) and reused until that changes: the prompt's start changes
when the Session Memory does anyway, and the blocks are chosen again then, with that request's
question. A request that found nothing pins nothing (the next one searches again). In-process
only: another replica, or a restart, chooses again — a cache miss, never a wrong answer.
"""

from __future__ import annotations

import sys

from ctxproxy.cache import ENTRY_BYTES, ByteLRU
from ctxproxy.memory.inject import MemoryBlock
from ctxproxy.memory.scopes import MemoryScope
from ctxproxy.strategies.base import Checkpoint

__all__ = ["LayerPins", "PinKey"]

PinKey = tuple[str, str, str | None, str | None, int, str]
Blocks = tuple[MemoryBlock, ...]


class LayerPins:
    def __init__(self, cache: ByteLRU[PinKey, Blocks]) -> None:
        self._cache = cache

    def get(self, scope: MemoryScope, checkpoint: Checkpoint | None) -> Blocks | None:
        return self._cache.get(_key(scope, checkpoint))

    def put(self, scope: MemoryScope, checkpoint: Checkpoint | None, blocks: Blocks) -> None:
        """Pin ``blocks`` when they hold a memory (see the module docstring)."""
        if any(block.memories for block in blocks):
            size = ENTRY_BYTES + sum(sys.getsizeof(m.text) + 100 for block in blocks for m in block.memories)
            self._cache.put(_key(scope, checkpoint), blocks, size)


def _key(scope: MemoryScope, checkpoint: Checkpoint | None) -> PinKey:
    end, prefix = (checkpoint.end, checkpoint.prefix_hash) if checkpoint is not None else (0, "")
    return (scope.tenant, scope.session, scope.user, scope.scope, end, prefix)

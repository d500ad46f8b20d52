"""The writes a store instance began and that have not ended, by key.

``DiskStore`` reads on the caller's thread but writes in worker threads; a read of a key first
waits for the writes of that key the instance began, so it never overtakes one still queued.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

__all__ = ["PendingWrites"]


class PendingWrites:
    """The writes a store instance began that have not ended, by key (on the loop's thread)."""

    def __init__(self) -> None:
        self._by_key: dict[str, set[asyncio.Future[Any]]] = {}

    def add(self, keys: Collection[str], future: asyncio.Future[Any]) -> None:
        for key in keys:
            self._by_key.setdefault(key, set()).add(future)
        future.add_done_callback(lambda ended: self._ended(keys, ended))

    def _ended(self, keys: Collection[str], future: asyncio.Future[Any]) -> None:
        for key in keys:
            pending = self._by_key.get(key)
            if pending is not None:
                pending.discard(future)
                if not pending:
                    del self._by_key[key]

    def of(self, key: str) -> set[asyncio.Future[Any]] | None:
        return self._by_key.get(key)

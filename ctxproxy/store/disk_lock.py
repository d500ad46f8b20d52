"""``DiskLock``: ``DiskStore``'s lease (see ``ctxproxy.store.base`` for the contract)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxproxy.store.keys import lease_record_key
from ctxproxy.store.polled_lock import PolledLock

if TYPE_CHECKING:
    from ctxproxy.store.disk import DiskStore

__all__ = ["DiskLock"]


class DiskLock(PolledLock):
    """A lease on a name: an ``{"owner": token, ...}`` record under a reserved key, expiring
    ``ttl`` seconds after it was acquired or last renewed.

    Acquire, renew and release are SQLite transactions, so they are atomic across processes;
    ``acquire`` also takes over a lease whose holder is known to be gone (``DiskStore``).
    """

    def __init__(self, store: DiskStore, key: str, ttl: float) -> None:
        super().__init__(key, ttl)
        self._store = store
        self._record = lease_record_key(key)

    async def _take(self, token: str) -> int | None:
        record, ttl, store = self._record, self._ttl, self._store
        return await store._run("lock.acquire", self._key, lambda: store._try_lock(record, token, ttl))

    async def _extend(self, token: str) -> bool:
        record, ttl, store = self._record, self._ttl, self._store
        return await store._run("lock.renew", self._key, lambda: store._renew(record, token, ttl))

    async def _give_up(self, token: str) -> None:
        record, store = self._record, self._store
        await store._run("lock.release", self._key, lambda: store._unlock(record, token))

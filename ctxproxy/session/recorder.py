"""Session records written in batches, off the request path.

Every chat request updates its session's record (requests, last seen, size). Writing each one
as it happens costs a store transaction and a thread hand-off per request; instead the
recorder keeps, per session, the newest observation and how many requests it stands for, and
writes every session that changed in one ``update_many`` every ``interval`` seconds. A record
is therefore at most ``interval`` stale; what the proxy needs for correctness (checkpoints)
never goes through here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog

from ctxproxy.session.identity import SessionKey
from ctxproxy.session.records import Observation, touch
from ctxproxy.store import Store, StoreError, UpdateFn, warn_store_failure
from ctxproxy.store.keys import session_record_key

log = structlog.get_logger(__name__)


@dataclass
class _Pending:
    key: SessionKey
    seen: Observation
    requests: int
    ttl: float


class SessionRecorder:
    def __init__(self, store: Store, interval: float = 0.25) -> None:
        self._store = store
        self._interval = interval
        self._pending: dict[str, _Pending] = {}
        self._wake = asyncio.Event()

    def observe(self, key: SessionKey, seen: Observation, ttl: float) -> None:
        name = session_record_key(key)
        found = self._pending.get(name)
        if found is None:
            self._pending[name] = _Pending(key, seen, 1, ttl)
        else:
            found.requests += 1
            if seen.at >= found.seen.at:
                found.seen = seen
        self._wake.set()

    async def flush(self) -> None:
        batch, self._pending = self._pending, {}
        if not batch:
            return
        updates = {name: _touch(p) for name, p in batch.items()}
        ttl = max(p.ttl for p in batch.values())
        try:
            await self._store.update_many(updates, ttl=ttl)
        except StoreError as exc:  # records are statistics: drop the batch, keep serving
            warn_store_failure(log, exc, "session.record_failed", sessions=len(batch), error=str(exc))

    async def run(self) -> None:
        """Flush every ``interval`` while there is something to write, until cancelled."""
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                await asyncio.sleep(self._interval)
                await self.flush()
        finally:
            await asyncio.shield(self.flush())


def _touch(pending: _Pending) -> UpdateFn:
    return lambda record: touch(record, pending.key, pending.seen, pending.requests)

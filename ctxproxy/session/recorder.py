"""Session records, histories and tenant statistics written in batches, off the request path.

Every chat request, when it ends, updates its session's record (requests, last seen, size),
appends a line to the session's history (``session.records``) and counts into its tenant's
current time bucket (``session.tenant_stats``). Writing each one as it happens costs a store
transaction and a thread hand-off per request; instead the recorder keeps, per session, what
its requests since the last write said (the newest ``MAX_HISTORY`` of them, and how many
there were), per tenant and bucket the sums, and writes everything that changed in one
``update_many`` every ``interval`` seconds (the buckets in a second one: their ttl differs).
What is written is therefore at most ``interval`` stale; what the proxy needs for correctness
(checkpoints) never goes through here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import structlog

from ctxproxy.session.forget import forget_session
from ctxproxy.session.identity import SessionKey
from ctxproxy.session.records import MAX_HISTORY, Observation, appended, touch
from ctxproxy.session.tenant_stats import KEEP_SECONDS, Totals, added, bucket_of
from ctxproxy.store import Store, StoreError, UpdateFn, warn_store_failure
from ctxproxy.store.keys import session_history_key, session_record_key, tenant_stats_key

log = structlog.get_logger(__name__)
BATCH = 256  # requests noted before they are sorted into their sessions and buckets (``observe``)


@dataclass
class _Pending:
    key: SessionKey
    ttl: float
    requests: int = 0
    seen: list[Observation] = field(default_factory=list)  # the newest MAX_HISTORY, oldest first


class SessionRecorder:
    def __init__(self, store: Store, interval: float = 0.25, batch: int = BATCH) -> None:
        self._store = store
        self._interval = interval
        self._batch = batch
        self._pending: dict[str, _Pending] = {}  # by the session key's ``store_id``
        self._stats: dict[tuple[str, int], Totals] = {}  # by tenant and ``bucket_of``
        self._seen: list[tuple[SessionKey, Observation, float]] = []  # not yet sorted into those (``observe``)
        self._wake = asyncio.Event()

    def observe(self, key: SessionKey, seen: Observation, ttl: float) -> None:
        """Note a request: kept as it came, and sorted into its session and tenant bucket with
        others (``BATCH`` at a time, or when written): one run of the same code for many."""
        self._seen.append((key, seen, ttl))
        if len(self._seen) >= self._batch:
            self._sort()
        self._wake.set()

    def _sort(self) -> None:
        seen, self._seen = self._seen, []
        for key, one, ttl in seen:
            # Kept by the key's store id and the tenant's bucket: their store keys are made when written.
            pending = self._pending.get(key.store_id)
            if pending is None:
                pending = self._pending[key.store_id] = _Pending(key, ttl)
            pending.requests += 1
            pending.seen.append(one)
            if len(pending.seen) > MAX_HISTORY:
                del pending.seen[0]
            bucket = (key.tenant, bucket_of(one.at))
            sums = self._stats.get(bucket)
            self._stats[bucket] = Totals.of(one) if sums is None else sums + Totals.of(one)

    async def forget(self, key: SessionKey) -> bool:
        """Drop what is waiting to be written about the session, then delete everything the Store
        keeps of it (``session.forget``); True if the Store held anything. The tenant's buckets
        keep counting its requests: they are the tenant's traffic, not the session's."""
        self._sort()
        self._pending.pop(key.store_id, None)
        return await forget_session(self._store, key)

    async def flush(self) -> None:
        self._sort()
        batch, self._pending = self._pending, {}
        stats, self._stats = self._stats, {}
        if batch:
            updates: dict[str, UpdateFn] = {}
            for pending in batch.values():
                updates[session_record_key(pending.key)] = _touch(pending)
                updates[session_history_key(pending.key)] = _append(pending)
            await self._write(updates, max(p.ttl for p in batch.values()), "session.record_failed")
        if stats:
            counts = {tenant_stats_key(*bucket): _count(more) for bucket, more in stats.items()}
            await self._write(counts, KEEP_SECONDS, "session.stats_failed")

    async def _write(self, updates: dict[str, UpdateFn], ttl: float, event: str) -> None:
        try:
            await self._store.update_many(updates, ttl=ttl)
        except StoreError as exc:  # records are statistics: drop the batch, keep serving
            warn_store_failure(log, exc, event, keys=len(updates), error=str(exc))

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
    newest = max(pending.seen, key=lambda o: o.at)
    return lambda record: touch(record, pending.key, newest, pending.requests, pending.seen)


def _append(pending: _Pending) -> UpdateFn:
    entries = [o.entry() for o in pending.seen]
    return lambda history: appended(history, entries)


def _count(more: Totals) -> UpdateFn:
    return lambda bucket: added(bucket, more)

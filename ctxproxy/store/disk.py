"""``DiskStore``: the embedded default ``Store``, on ``diskcache`` (SQLite in WAL mode).

Guarantees, for every process on one host that opens the same directory:

* **Atomic across processes**: ``update``, ``compare_and_set``, lock acquire and lock release
  each run inside one ``Cache.transact()`` (an SQLite ``BEGIN IMMEDIATE`` transaction), so no
  other process or thread writes in between. ``put`` and ``delete`` are single atomic writes.
  ``update``'s ``fn`` runs exactly once, in a worker thread, while that write lock is held.
* **Readers see committed values only** and are not blocked by writers (WAL).
* **Values are JSON bytes** (``orjson.dumps``), never pickles, and stay inside the SQLite file:
  diskcache's spilling of large values to separate files is switched off, so a value cannot
  vanish from under its index row and a concurrent replacement never looks like a missing key.
  Eviction is off too (``eviction_policy="none"``): nothing disappears except by ``delete``
  or by its own ttl.
* **Corrupt entries are reported and skipped**: an entry that is not JSON bytes (garbage, a
  pickle, a str written by someone else) or whose value file is gone (a directory written by
  another diskcache configuration) is logged as ``store.corrupt_entry`` with the key and the
  error type, never the value, and treated as absent. Pickles are never unpickled.
* **Backend failures raise ``StoreError``** naming the operation and the key: SQLite errors,
  a timeout (``sqlite_timeout`` seconds) waiting for another writer, ``OSError`` (disk full,
  permission denied), or use after ``close()``.
* **Leases** (``lock``) are records ``{owner, host, pid, store}`` expiring after ``ttl``; ``renew``
  extends one, and each acquisition counts up the store's fencing token (``FENCE_KEY``).
  ``acquire`` takes a lease over at once when its holder is known to be gone: a process on this
  host (``ctxproxy.store.owner``) that no longer runs, or this very store instance when the
  lease's release failed (a full disk, say) and no lock object of ours holds it any more. Any
  other lease ends by release or expiry.
* **Health**: every operation's outcome is reported to ``health`` (a ``StoreHealth``) with the
  bytes it tried to write; ``check_writable`` probes with as many bytes as the largest write that
  failed since the store last worked.
* Writes, transactions and scans run in a small thread pool owned by the instance (contextvars
  are carried over, so log lines keep their request context); a cancelled call may still finish
  in its worker thread. ``get`` and ``get_bytes`` run on the caller's thread: one SELECT of
  committed rows, which in WAL mode waits for no writer, is cheaper than the hop to a worker.
  Such a read first waits for the writes of its key this instance began (not for other
  processes' or instances'), so it never overtakes a write still queued for a worker.

Keys beginning with ``__store__:`` (``ctxproxy.store.keys.RESERVED_PREFIX``) are reserved for the
store's own records (leases, the writability probe): ``keys()`` never returns them and the data
methods reject them.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import os
import secrets
import sqlite3
import threading
import time
import traceback
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, TypeVar

import diskcache
import orjson
import structlog

from ctxproxy.store.base import JSONValue, StoreError, UpdateFn
from ctxproxy.store.disk_lock import DiskLock
from ctxproxy.store.disk_values import JsonDisk, UnreadableEntry, describe_failure
from ctxproxy.store.health import StoreHealth
from ctxproxy.store.keys import FENCE_KEY, LEASE_PREFIX, RESERVED_PREFIX, probe_key
from ctxproxy.store.owner import process_gone, this_host
from ctxproxy.store.pending import PendingWrites
from ctxproxy.store.values import (
    CallerError,
    canonical,
    check_key,
    check_ttl,
    decode,
    encode,
    report_corrupt,
    stored_bytes,
)

__all__ = ["DiskLock", "DiskStore"]

log = structlog.get_logger(__name__)

T = TypeVar("T")

_NEVER_SPILL: Final = 2**31 - 1  # disk_min_file_size: above SQLite's maximum blob size
_MISSING: Final = object()
_BACKEND_ERRORS: Final = (sqlite3.Error, diskcache.Timeout, OSError)
# Live keys from ``prefix`` on, in key order (str keys are stored raw, as SQLite TEXT).
_KEYS_SQL: Final = (
    "SELECT key FROM Cache WHERE key >= ? AND raw = 1 AND (expire_time IS NULL OR expire_time > ?) ORDER BY key"
)


class DiskStore:
    """The ``Store`` protocol on a diskcache directory; see the module docstring."""

    def __init__(self, path: str | os.PathLike[str], *, sqlite_timeout: float = 5.0, max_workers: int = 4) -> None:
        self.path = Path(path)
        self._timeout = sqlite_timeout
        self._workers = max_workers
        self._closed = False
        self.health = StoreHealth()
        self._attempt = threading.local()  # bytes the running call tried to write, per worker
        self._pending = PendingWrites()
        self._host = this_host()
        self._instance = secrets.token_hex(8)
        self._held: set[str] = set()  # owner tokens of leases a lock object of ours holds
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="diskstore")
        try:
            self._cache: Any = self._executor.submit(self._open_cache).result()
        except BaseException:
            self._executor.shutdown(wait=False)
            raise
        # Start every worker now, so close() can reach each one's SQLite connection.
        for future in self._on_every_worker(lambda: None):
            future.result()

    def _open_cache(self) -> Any:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            cache = diskcache.Cache(
                str(self.path),
                timeout=self._timeout,
                disk=JsonDisk,
                eviction_policy="none",
                disk_min_file_size=_NEVER_SPILL,
            )
        except (*_BACKEND_ERRORS, ValueError) as exc:
            # The failed constructor's frames hold its SQLite connection, and a Python 3.11
            # connection is in a reference cycle: drop the frames' locals and collect, so the
            # file is not held open until some later garbage collection.
            traceback.clear_frames(exc.__traceback__)
            gc.collect()
            where, why = str(self.path), describe_failure(exc, self._timeout, 0.0)
            raise StoreError(f"open failed for diskcache store at {where!r}: {why}") from exc
        cache.close()  # connections are opened per worker thread, on first use
        return cache

    # -- running blocking calls --------------------------------------------------------------

    async def _run(self, op: str, key: str, fn: Callable[[], T], writes: Collection[str] = ()) -> T:
        """Run ``fn`` in a worker thread; backend errors become ``StoreError(op, key)``. ``writes``:
        the keys ``fn`` writes; until it ends, a read of one of them waits for it."""
        self._check_open(op, key)
        context = contextvars.copy_context()
        future = asyncio.wrap_future(self._executor.submit(context.run, self._mapped, op, key, fn))
        if writes:
            self._pending.add(writes, future)
        return await future

    async def _read_now(self, key: str, fn: Callable[[], T]) -> T:
        """Run the read ``fn`` on the calling thread, after the writes of ``key`` this instance
        began: a read is not to overtake a write still queued for a worker.

        A read of committed rows in WAL mode waits for no writer, and with eviction off it writes
        nothing: one SELECT of a row, ~6-12 µs, where the round trip through a worker costs
        ~40-55 µs of CPU (thread wake-ups and the loop's wake-up)."""
        pending = self._pending.of(key)
        if pending:
            await asyncio.wait(pending)  # their outcome is their callers'
        self._check_open("get", key)
        return self._mapped("get", key, fn)

    def _check_open(self, op: str, key: str) -> None:
        if self._closed:
            raise StoreError(f"{op} failed for key {key!r}: the store is closed")

    def _mapped(self, op: str, key: str, fn: Callable[[], T]) -> T:
        started = time.monotonic()
        self._attempt.bytes = 0
        try:
            result = fn()
        except CallerError as wrapped:
            raise wrapped.original from None
        except _BACKEND_ERRORS as exc:
            why = describe_failure(exc, self._timeout, time.monotonic() - started)
            self.health.failure(op, why, self._attempt.bytes)
            raise StoreError(f"{op} failed for key {key!r}: {why}") from exc
        self.health.success(self._attempt.bytes)
        return result

    def _set(self, key: str, data: bytes, ttl: float | None) -> None:
        self._attempt.bytes += len(data)
        self._cache.set(key, data, expire=ttl)

    def _on_every_worker(self, fn: Callable[[], None]) -> list[Future[None]]:
        """Run ``fn`` once in each worker thread (all workers must exist or be creatable)."""
        barrier = threading.Barrier(self._workers)

        def once() -> None:
            try:
                barrier.wait(timeout=self._timeout + 30)
            except threading.BrokenBarrierError:
                pass
            fn()

        return [self._executor.submit(once) for _ in range(self._workers)]

    # -- single-entry primitives (worker thread) ---------------------------------------------

    def _read(self, key: str) -> JSONValue | None:
        """The decoded value; ``None`` if missing, expired or corrupt (corrupt is logged)."""
        stored = self._read_bytes(key)
        return None if stored is None else decode(key, stored)

    def _read_bytes(self, key: str) -> bytes | None:
        """The stored bytes; ``None`` if missing, expired or not bytes (that is logged as corrupt)."""
        try:
            stored = self._cache.get(key, default=_MISSING)
        except UnreadableEntry as exc:
            report_corrupt(key, exc.cause)
            return None
        return None if stored is _MISSING else stored_bytes(key, stored)

    def _write(self, key: str, data: bytes | None, ttl: float | None) -> None:
        if data is None:
            self._cache.delete(key)
        else:
            self._set(key, data, ttl)

    def _update_sync(self, key: str, fn: UpdateFn, ttl: float | None) -> JSONValue | None:
        with self._cache.transact():
            current = self._read(key)
            try:
                new = fn(current)
                data = encode(new)
            except Exception as exc:
                raise CallerError(exc) from exc
            self._write(key, data, ttl)
            return new

    def _update_many_sync(self, updates: Mapping[str, UpdateFn], ttl: float | None) -> None:
        with self._cache.transact():
            for key, fn in updates.items():
                try:
                    data = encode(fn(self._read(key)))
                except Exception as exc:
                    raise CallerError(exc) from exc
                self._write(key, data, ttl)

    def _cas_sync(self, key: str, expected: bytes, data: bytes | None, ttl: float | None) -> bool:
        with self._cache.transact():
            if canonical(self._read(key)) != expected:
                return False
            self._write(key, data, ttl)
            return True

    def _keys_sync(self, prefix: str) -> list[str]:
        # diskcache has no prefix query; its iterkeys() walks every key and includes expired ones.
        cursor = self._cache._sql(_KEYS_SQL, (prefix, time.time()))
        found: list[str] = []
        try:
            for (key,) in cursor:
                if not isinstance(key, str) or not key.startswith(prefix):
                    break  # sorted: text keys after the prefix range, then blobs
                if not key.startswith(RESERVED_PREFIX):
                    found.append(key)
        finally:
            cursor.close()
        return sorted(found)

    def _probe_sync(self, key: str) -> None:
        data = orjson.dumps({"probe": key, "pad": "x" * self.health.probe_size()})
        self._set(key, data, 60)
        try:
            read_back = self._cache.get(key, default=None)
        except UnreadableEntry as exc:
            raise StoreError(f"check_writable failed for key {key!r}: probe unreadable ({exc})") from exc
        finally:
            self._cache.delete(key)
        if read_back != data:
            raise StoreError(f"check_writable failed for key {key!r}: probe read back a different value")

    def _lease(self, token: str) -> bytes:
        return orjson.dumps({"owner": token, "host": self._host, "pid": os.getpid(), "store": self._instance})

    def _abandoned(self, lease: JSONValue | None) -> bool:
        """True when the lease's holder is known to be gone (see the module docstring)."""
        if not isinstance(lease, dict) or self._host is None or lease.get("host") != self._host:
            return False  # another host, or no way to tell: wait for the lease to expire
        pid = lease.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            return False
        if pid == os.getpid():
            return lease.get("store") == self._instance and lease.get("owner") not in self._held
        return process_gone(pid)

    def _try_lock(self, key: str, token: str, ttl: float) -> int | None:
        try:
            with self._cache.transact():
                current = self._read(key)
                if current is not None and not self._abandoned(current):
                    return None
                if isinstance(current, dict):
                    log.warning("store.lease_taken_over", key=key[len(LEASE_PREFIX) :], holder_pid=current.get("pid"))
                self._held.add(token)
                self._set(key, self._lease(token), ttl)
                last = self._read(FENCE_KEY)
                fence = (last if isinstance(last, int) and not isinstance(last, bool) else 0) + 1
                self._set(FENCE_KEY, orjson.dumps(fence), None)
                return fence
        except BaseException:
            self._held.discard(token)
            raise

    def _renew(self, key: str, token: str, ttl: float) -> bool:
        with self._cache.transact():
            current = self._read(key)
            if not (isinstance(current, dict) and current.get("owner") == token):
                self._held.discard(token)
                return False  # expired, and maybe taken by someone else since
            self._set(key, self._lease(token), ttl)
            return True

    def _unlock(self, key: str, token: str) -> bool:
        self._held.discard(token)  # first: if the delete fails, the lease is known abandoned
        with self._cache.transact():
            current = self._read(key)
            if not (isinstance(current, dict) and current.get("owner") == token):
                return False  # expired, and maybe taken by someone else since
            self._cache.delete(key)
            return True

    # -- the Store protocol ------------------------------------------------------------------

    async def get(self, key: str) -> JSONValue | None:
        check_key(key)
        return await self._read_now(key, lambda: self._read(key))

    async def get_bytes(self, key: str) -> bytes | None:
        check_key(key)
        return await self._read_now(key, lambda: self._read_bytes(key))

    async def put(self, key: str, value: JSONValue, *, ttl: float | None = None) -> None:
        check_key(key)
        check_ttl(ttl)
        data = encode(value)
        await self._run("put", key, lambda: self._write(key, data, ttl), (key,))

    async def delete(self, key: str) -> bool:
        check_key(key)
        return await self._run("delete", key, lambda: bool(self._cache.delete(key)), (key,))

    async def update(self, key: str, fn: UpdateFn, *, ttl: float | None = None) -> JSONValue | None:
        check_key(key)
        check_ttl(ttl)
        return await self._run("update", key, lambda: self._update_sync(key, fn, ttl), (key,))

    async def update_many(self, updates: Mapping[str, UpdateFn], *, ttl: float | None = None) -> None:
        for key in updates:
            check_key(key)
        check_ttl(ttl)
        if updates:
            first = next(iter(updates))
            await self._run("update_many", first, lambda: self._update_many_sync(updates, ttl), tuple(updates))

    async def compare_and_set(
        self, key: str, expected: JSONValue | None, new: JSONValue, *, ttl: float | None = None
    ) -> bool:
        check_key(key)
        check_ttl(ttl)
        want, data = canonical(expected), encode(new)
        return await self._run("compare_and_set", key, lambda: self._cas_sync(key, want, data, ttl), (key,))

    async def keys(self, prefix: str) -> list[str]:
        return await self._run("keys", prefix, lambda: self._keys_sync(prefix))

    def lock(self, key: str, *, ttl: float) -> DiskLock:
        check_ttl(ttl)
        return DiskLock(self, key, ttl)

    async def check_writable(self) -> None:
        key = probe_key(secrets.token_hex(8))
        await self._run("check_writable", key, lambda: self._probe_sync(key))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Queued calls finish first; then each worker closes its own SQLite connection.
        await asyncio.gather(*(asyncio.wrap_future(f) for f in self._on_every_worker(self._cache.close)))
        self._executor.shutdown(wait=True)
        self._cache.close()  # the connection the reads on this (the loop's) thread opened

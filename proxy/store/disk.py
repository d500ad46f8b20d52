"""``DiskStore``: the embedded default, on ``diskcache`` (SQLite plus value files).

Values are stored as JSON bytes (orjson), never pickles, so entries are inspectable and a
corrupt one is detectable. ``update``, ``compare_and_set`` and lock operations run inside
``Cache.transact()``, an SQLite ``BEGIN IMMEDIATE`` transaction, so they are atomic across
every process that opens the same directory. Blocking calls run in the instance's own thread
pool, off the event loop. All values live in the SQLite file itself.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import diskcache
import orjson
import structlog

from proxy.store.base import JSONValue, LockTimeout, StoreError, Updater

log = structlog.get_logger(__name__)
T = TypeVar("T")

_MISSING = object()
_NEVER_SPILL = 2**31 - 1
_PROBE_KEY = "ctx:__probe__"
_LOCK_PREFIX = "ctx:__lock__:"


class DiskStore:
    def __init__(self, path: str | os.PathLike[str], *, sqlite_timeout: float = 5.0, threads: int = 4) -> None:
        self.path = Path(path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            # Values stay inside SQLite (no spill files), so one database file is the whole store:
            # there is no value file that can vanish from under its index entry.
            self._cache = diskcache.Cache(str(self.path), timeout=sqlite_timeout, disk_min_file_size=_NEVER_SPILL)
        except Exception as exc:
            raise StoreError(f"cannot open diskcache store at {self.path}: {exc}") from exc
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="store")

    async def _run(self, op: str, key: str, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, fn)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"store {op} failed for key {key!r}: {type(exc).__name__}: {exc}") from exc

    # -- reading, with corrupt entries skipped -------------------------------------------------

    def _read(self, key: str) -> JSONValue | None:
        try:
            raw = self._cache.get(key, default=_MISSING)
        except (OSError, EOFError, ValueError, TypeError, AttributeError, ImportError) as exc:
            # A value file that vanished, or a pickle we cannot load: this entry only.
            self._corrupt(key, exc)
            return None
        if raw is _MISSING:
            return None
        if not isinstance(raw, bytes):
            self._corrupt(key, TypeError(f"stored {type(raw).__name__}, expected JSON bytes"))
            return None
        try:
            value: JSONValue = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            self._corrupt(key, exc)
            return None
        return value

    @staticmethod
    def _corrupt(key: str, exc: BaseException) -> None:
        log.warning("store.corrupt_entry", key=key, error=type(exc).__name__)

    @staticmethod
    def _encode(value: JSONValue) -> bytes:
        return orjson.dumps(value)

    # -- the Store protocol ----------------------------------------------------------------------

    async def get(self, key: str) -> JSONValue | None:
        return await self._run("get", key, lambda: self._read(key))

    async def put(self, key: str, value: JSONValue, *, ttl: float | None = None) -> None:
        data = self._encode(value)
        await self._run("put", key, lambda: self._cache.set(key, data, expire=ttl))

    async def delete(self, key: str) -> bool:
        return await self._run("delete", key, lambda: bool(self._cache.delete(key)))

    async def update(self, key: str, fn: Updater, *, ttl: float | None = None) -> JSONValue | None:
        def run() -> JSONValue | None:
            with self._cache.transact():
                new = fn(self._read(key))
                if new is None:
                    self._cache.delete(key)
                else:
                    self._cache.set(key, self._encode(new), expire=ttl)
                return new

        return await self._run("update", key, run)

    async def compare_and_set(
        self, key: str, expected: JSONValue | None, new: JSONValue, *, ttl: float | None = None
    ) -> bool:
        data = self._encode(new)

        def run() -> bool:
            with self._cache.transact():
                if self._read(key) != expected:
                    return False
                self._cache.set(key, data, expire=ttl)
                return True

        return await self._run("compare_and_set", key, run)

    async def keys(self, prefix: str) -> list[str]:
        def run() -> list[str]:
            return sorted(k for k in self._cache.iterkeys() if isinstance(k, str) and k.startswith(prefix))

        return await self._run("keys", prefix, run)

    def lock(self, key: str, *, ttl: float) -> DiskLock:
        return DiskLock(self, _LOCK_PREFIX + key, ttl)

    async def check_writable(self) -> None:
        token = secrets.token_hex(8)

        def run() -> None:
            self._cache.set(_PROBE_KEY, token.encode(), expire=60)
            if self._cache.get(_PROBE_KEY) != token.encode():
                raise StoreError("store probe read back a different value")
            self._cache.delete(_PROBE_KEY)

        await self._run("check_writable", _PROBE_KEY, run)

    async def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._cache.close()

    # -- lock primitives (used by DiskLock) -------------------------------------------------------

    def _try_lock(self, key: str, token: str, ttl: float) -> bool:
        return bool(self._cache.add(key, token.encode(), expire=ttl))

    def _unlock(self, key: str, token: str) -> bool:
        with self._cache.transact():
            if self._cache.get(key) == token.encode():
                self._cache.delete(key)
                return True
            return False


class DiskLock:
    """A lease on ``key``: an owner token stored with ``add`` (atomic), expiring after ``ttl``."""

    def __init__(self, store: DiskStore, key: str, ttl: float) -> None:
        self._store = store
        self._key = key
        self._ttl = ttl
        self._token = secrets.token_hex(16)
        self._held = False

    @property
    def held(self) -> bool:
        return self._held

    async def acquire(self, *, blocking: bool = True, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.005
        while True:
            got = await self._store._run(
                "lock", self._key, lambda: self._store._try_lock(self._key, self._token, self._ttl)
            )
            if got:
                self._held = True
                return True
            if not blocking or (deadline is not None and time.monotonic() >= deadline):
                return False
            wait = pause if deadline is None else min(pause, max(0.0, deadline - time.monotonic()))
            await asyncio.sleep(wait)
            pause = min(pause * 2, 0.1)

    async def release(self) -> None:
        if not self._held:
            return
        self._held = False
        await self._store._run("unlock", self._key, lambda: self._store._unlock(self._key, self._token))

    async def __aenter__(self) -> DiskLock:
        if not await self.acquire(blocking=True, timeout=self._ttl):
            raise LockTimeout(f"could not acquire lock {self._key!r} within {self._ttl:g}s")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.release()



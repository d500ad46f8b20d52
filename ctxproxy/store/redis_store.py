"""``RedisStore``: the ``Store`` protocol on a Redis server, for several replicas on several machines.

Guarantees, for every process that opens the same server with the same ``key_prefix``:

* **Values are JSON bytes** (``ctxproxy.store.values``, the same bytes ``DiskStore`` keeps), one
  Redis string per key, under ``key_prefix`` + the key. A ttl is the key's own expiry (``PX``),
  so an expired value is gone for every reader at once; without one a value never expires.
* **Atomic read-modify-writes**: ``update``, ``update_many`` and ``compare_and_set`` are
  optimistic transactions: ``WATCH`` the keys, read them, compute, then ``MULTI``/``EXEC`` the
  writes, which Redis refuses when any watched key changed meanwhile (a write or an expiry by
  anyone); then the step is tried again on what is there now, after a short jittered pause.
  So an ``update``'s ``fn`` runs once per attempt, more than once under contention: it must be
  pure. ``put`` and ``delete`` are single commands.
* **Corrupt entries** (bytes that are not JSON, a key of another Redis type) are logged as
  ``store.corrupt_entry`` with the key and the error type and read as absent.
* **Leases** (``lock``, ``ctxproxy.store.redis_lock``) are ``SET NX PX`` records holding the owner's
  token, renewed and released by compare-and-set scripts; a holder that died leaves its lease
  until it expires (``ttl``: seconds), since no replica can tell another machine's process is gone.
* **Failures raise ``StoreError``** naming the operation and the key: connection refused or
  lost, a command slower than ``timeout`` (connecting: ``connect_timeout``), no connection free
  in the pool (``pool_size``) within ``timeout``, an error reply (out of memory, a read-only
  replica), or use after ``close()``. A connection failure opens an outage (``Outage``): for a
  second the store fails at once instead of waiting on a dead server again, and the log says so
  once per interval. ``check_writable`` always tries the server, so ``/readyz`` tells the truth.
* **Health** as ``DiskStore``: every operation's outcome goes to ``health`` with its bytes.

Keys under ``__store__:`` (``ctxproxy.store.keys.RESERVED_PREFIX``) hold the leases and the probe.
"""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

import orjson
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ctxproxy.store.base import JSONValue, StoreError, UpdateFn
from ctxproxy.store.health import StoreHealth
from ctxproxy.store.keys import DEFAULT_KEY_PREFIX, RESERVED_PREFIX, probe_key
from ctxproxy.store.outage import Outage
from ctxproxy.store.redis_lock import LeaseScripts, RedisLock
from ctxproxy.store.redis_url import check_url, redacted
from ctxproxy.store.values import (
    canonical,
    check_key,
    check_ttl,
    decode,
    encode,
    milliseconds,
    report_corrupt,
    stored_bytes,
)

__all__ = ["RedisStore"]

MAX_ATTEMPTS: Final = 200  # of one optimistic transaction that other writers keep interrupting
_UNREACHABLE: Final = (RedisConnectionError, RedisTimeoutError)
_GLOB_SPECIAL: Final = frozenset("*?[]\\")

Writes = list[bytes | None]  # one per key of a transaction: the new bytes, None deletes
Compute = Callable[[list[JSONValue | None]], Writes | None]


@dataclass
class _Attempt:
    bytes: int = 0  # what the operation tried to write, for ``health``


class RedisStore:
    """The ``Store`` protocol on a Redis server; see the module docstring."""

    def __init__(
        self,
        url: str,
        *,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        pool_size: int = 32,
        timeout: float = 2.0,
        connect_timeout: float = 2.0,
    ) -> None:
        check_url(url)
        self.where = redacted(url)
        self._prefix = key_prefix
        self._closed = False
        self.health = StoreHealth()
        self.outage = Outage(self.where)
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=pool_size,
            timeout=timeout,
            socket_timeout=timeout,
            socket_connect_timeout=connect_timeout,
            # One more try on a connection that broke (a pooled one the server closed, say);
            # a command that timed out is not sent again.
            retry=Retry(NoBackoff(), 1, (RedisConnectionError,)),
        )
        self._redis: Redis = Redis.from_pool(pool)
        self._scripts = LeaseScripts(self._redis)

    def _key(self, key: str) -> str:
        return self._prefix + key

    @asynccontextmanager
    async def _op(self, op: str, key: str, *, probe: bool = False) -> AsyncIterator[_Attempt]:
        """Run one operation: Redis errors become ``StoreError(op, key)``; the outcome goes to
        ``health`` and ``outage`` (which fails it at once during an outage, unless ``probe``)."""
        if self._closed:
            raise StoreError(f"{op} failed for key {key!r}: the store is closed")
        if not probe:
            self.outage.check(op, key)
        attempt = _Attempt()
        try:
            yield attempt
        except RedisError as exc:
            why = f"{type(exc).__name__}: {exc}"
            self.health.failure(op, why, attempt.bytes)
            if isinstance(exc, _UNREACHABLE):
                self.outage.failed(why)
            else:
                self.outage.worked()  # it answered
            raise StoreError(f"{op} failed for key {key!r}: {why}") from exc
        self.health.success(attempt.bytes)
        self.outage.worked()

    # -- transactions ----------------------------------------------------------------------------

    async def _transact(
        self,
        op: str,
        keys: Sequence[str],
        compute: Callable[[list[JSONValue | None]], Writes | None],
        ttl: float | None,
    ) -> bool:
        """Read ``keys``, ``compute`` their new bytes (None: write nothing, return False) and write
        them in one ``MULTI``, all under ``WATCH``: retried while another writer interferes."""
        names = [self._key(k) for k in keys]
        px = None if ttl is None else milliseconds(ttl)
        async with self._op(op, keys[0]) as attempt, self._redis.pipeline(transaction=True) as pipe:
            for tries in range(MAX_ATTEMPTS):
                await pipe.watch(*names)
                raws = await pipe.mget(names)
                writes = compute([None if raw is None else decode(k, raw) for k, raw in zip(keys, raws, strict=True)])
                if writes is None:
                    await pipe.unwatch()  # type: ignore[no-untyped-call]
                    return False
                attempt.bytes = sum(len(data) for data in writes if data is not None)
                pipe.multi()  # type: ignore[no-untyped-call]
                for name, data in zip(names, writes, strict=True):
                    if data is None:
                        pipe.delete(name)
                    else:
                        pipe.set(name, data, px=px)
                try:
                    await pipe.execute()
                    return True
                except WatchError:
                    await asyncio.sleep(random.random() * min(0.05, 0.001 * 2**tries))
        raise StoreError(f"{op} failed for key {keys[0]!r}: other writers changed it {MAX_ATTEMPTS} times in a row")

    # -- the Store protocol ----------------------------------------------------------------------

    async def get(self, key: str) -> JSONValue | None:
        raw = await self.get_bytes(key)
        return None if raw is None else decode(key, raw)

    async def get_bytes(self, key: str) -> bytes | None:
        check_key(key)
        async with self._op("get", key):
            try:
                raw = await self._redis.get(self._key(key))
            except ResponseError as exc:
                if "WRONGTYPE" not in str(exc):
                    raise
                report_corrupt(key, exc)  # a key of another Redis type: not ours to read
                return None
        return None if raw is None else stored_bytes(key, raw)

    async def put(self, key: str, value: JSONValue, *, ttl: float | None = None) -> None:
        check_key(key)
        check_ttl(ttl)
        data = encode(value)
        async with self._op("put", key) as attempt:
            if data is None:
                await self._redis.delete(self._key(key))
            else:
                attempt.bytes = len(data)
                await self._redis.set(self._key(key), data, px=None if ttl is None else milliseconds(ttl))

    async def delete(self, key: str) -> bool:
        check_key(key)
        async with self._op("delete", key):
            return bool(await self._redis.delete(self._key(key)))

    async def update(self, key: str, fn: UpdateFn, *, ttl: float | None = None) -> JSONValue | None:
        check_key(key)
        check_ttl(ttl)
        made: list[JSONValue | None] = [None]

        def compute(current: list[JSONValue | None]) -> Writes:
            made[0] = fn(current[0])
            return [encode(made[0])]

        await self._transact("update", [key], compute, ttl)
        return made[0]

    async def update_many(self, updates: Mapping[str, UpdateFn], *, ttl: float | None = None) -> None:
        for key in updates:
            check_key(key)
        check_ttl(ttl)
        if not updates:
            return
        fns = list(updates.values())

        def compute(current: list[JSONValue | None]) -> Writes:
            return [encode(fn(value)) for fn, value in zip(fns, current, strict=True)]

        await self._transact("update_many", list(updates), compute, ttl)

    async def compare_and_set(
        self, key: str, expected: JSONValue | None, new: JSONValue, *, ttl: float | None = None
    ) -> bool:
        check_key(key)
        check_ttl(ttl)
        want, data = canonical(expected), encode(new)

        def compute(current: list[JSONValue | None]) -> Writes | None:
            return [data] if canonical(current[0]) == want else None

        return await self._transact("compare_and_set", [key], compute, ttl)

    async def keys(self, prefix: str) -> list[str]:
        pattern = "".join("\\" + c if c in _GLOB_SPECIAL else c for c in self._prefix + prefix) + "*"
        found: list[str] = []
        async with self._op("keys", prefix):
            async for raw in self._redis.scan_iter(match=pattern, count=1000):
                name = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
                key = name[len(self._prefix) :]
                if name.startswith(self._prefix) and key.startswith(prefix) and not key.startswith(RESERVED_PREFIX):
                    found.append(key)
        return sorted(set(found))  # SCAN may return a key twice

    def lock(self, key: str, *, ttl: float) -> RedisLock:
        check_ttl(ttl)
        return RedisLock(self, self._scripts, key, ttl)

    async def check_writable(self) -> None:
        key = probe_key(secrets.token_hex(8))
        name = self._key(key)
        data = orjson.dumps({"probe": key, "pad": "x" * self.health.probe_size()})
        async with self._op("check_writable", key, probe=True) as attempt:
            attempt.bytes = len(data)
            try:
                await self._redis.set(name, data, px=60_000)
                read_back = await self._redis.get(name)
            finally:
                await self._redis.delete(name)
        if read_back != data:
            raise StoreError(f"check_writable failed for key {key!r}: probe read back a different value")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._redis.aclose()

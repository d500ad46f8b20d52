"""``CountingStore``: any ``Store``, with each ``StoreError`` it raises counted by operation.

A decorator, so failures are counted in one place whatever the backend and wherever the caller
catches them (``ctxproxy_store_errors_total{op}``). Every other behaviour is the wrapped store's,
unchanged; attributes of a backend beyond the protocol (a disk store's ``path``) read through.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from ctxproxy.store import JSONValue, LockTimeout, Store, StoreError, StoreLock, UpdateFn

OnError = Callable[[str], None]


@contextmanager
def _counted(op: str, on_error: OnError) -> Iterator[None]:
    try:
        yield
    except LockTimeout:
        raise  # a wait for a lease that gave up: the store did not fail
    except StoreError:
        on_error(op)
        raise


class CountingStore:
    def __init__(self, inner: Store, on_error: OnError) -> None:
        self.inner = inner
        self._on_error = on_error

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def get(self, key: str) -> JSONValue | None:
        with _counted("get", self._on_error):
            return await self.inner.get(key)

    async def get_bytes(self, key: str) -> bytes | None:
        with _counted("get", self._on_error):
            return await self.inner.get_bytes(key)

    async def put(self, key: str, value: JSONValue, *, ttl: float | None = None) -> None:
        with _counted("put", self._on_error):
            await self.inner.put(key, value, ttl=ttl)

    async def delete(self, key: str) -> bool:
        with _counted("delete", self._on_error):
            return await self.inner.delete(key)

    async def update(self, key: str, fn: UpdateFn, *, ttl: float | None = None) -> JSONValue | None:
        with _counted("update", self._on_error):
            return await self.inner.update(key, fn, ttl=ttl)

    async def update_many(self, updates: Mapping[str, UpdateFn], *, ttl: float | None = None) -> None:
        with _counted("update_many", self._on_error):
            await self.inner.update_many(updates, ttl=ttl)

    async def compare_and_set(
        self, key: str, expected: JSONValue | None, new: JSONValue, *, ttl: float | None = None
    ) -> bool:
        with _counted("compare_and_set", self._on_error):
            return await self.inner.compare_and_set(key, expected, new, ttl=ttl)

    async def keys(self, prefix: str) -> list[str]:
        with _counted("keys", self._on_error):
            return await self.inner.keys(prefix)

    def lock(self, key: str, *, ttl: float) -> StoreLock:
        with _counted("lock", self._on_error):
            return CountingLock(self.inner.lock(key, ttl=ttl), self._on_error)

    async def check_writable(self) -> None:
        with _counted("check_writable", self._on_error):
            await self.inner.check_writable()

    async def close(self) -> None:
        with _counted("close", self._on_error):
            await self.inner.close()


class CountingLock:
    """A store's lease, with its failures counted (``lock.acquire``, ``lock.renew``, ``lock.release``)."""

    def __init__(self, inner: StoreLock, on_error: OnError) -> None:
        self._inner = inner
        self._on_error = on_error

    @property
    def key(self) -> str:
        return self._inner.key

    @property
    def ttl(self) -> float:
        return self._inner.ttl

    @property
    def held(self) -> bool:
        return self._inner.held

    @property
    def fence(self) -> int | None:
        return self._inner.fence

    async def acquire(self, *, blocking: bool = True, timeout: float | None = None) -> bool:
        with _counted("lock.acquire", self._on_error):
            return await self._inner.acquire(blocking=blocking, timeout=timeout)

    async def renew(self) -> bool:
        with _counted("lock.renew", self._on_error):
            return await self._inner.renew()

    async def release(self) -> None:
        with _counted("lock.release", self._on_error):
            await self._inner.release()

    async def __aenter__(self) -> StoreLock:
        with _counted("lock.acquire", self._on_error):
            await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with _counted("lock.release", self._on_error):
            await self._inner.__aexit__(exc_type, exc, tb)

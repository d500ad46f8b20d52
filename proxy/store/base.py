"""The Store: where every piece of state another replica would need is kept.

A small async key/value protocol with JSON values. Implementations guarantee:

- ``update`` and ``compare_and_set`` are atomic across processes sharing the store;
- ``lock`` gives a lease (owner token + expiry) usable for single-flight across processes;
  an expired lease can be taken by someone else, so a crashed holder never blocks forever;
- an entry that cannot be read or decoded is logged and treated as absent, never raised to a
  request; a backend that cannot be used at all raises ``StoreError``.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol

JSONValue = dict[str, Any] | list[Any] | str | int | float | bool | None
Updater = Callable[[JSONValue | None], JSONValue | None]


class StoreError(Exception):
    """The backend failed; the message names the operation and key."""


class LockTimeout(StoreError):
    pass


class StoreLock(Protocol):
    @property
    def held(self) -> bool: ...

    async def acquire(self, *, blocking: bool = True, timeout: float | None = None) -> bool: ...

    async def release(self) -> None: ...

    async def __aenter__(self) -> StoreLock: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class Store(Protocol):
    async def get(self, key: str) -> JSONValue | None: ...

    async def put(self, key: str, value: JSONValue, *, ttl: float | None = None) -> None: ...

    async def delete(self, key: str) -> bool: ...

    async def update(self, key: str, fn: Updater, *, ttl: float | None = None) -> JSONValue | None:
        """Atomically replace the value with ``fn(current)``; ``None`` from fn deletes the key."""
        ...

    async def compare_and_set(
        self, key: str, expected: JSONValue | None, new: JSONValue, *, ttl: float | None = None
    ) -> bool: ...

    async def keys(self, prefix: str) -> list[str]: ...

    def lock(self, key: str, *, ttl: float) -> StoreLock: ...

    async def check_writable(self) -> None: ...

    async def close(self) -> None: ...

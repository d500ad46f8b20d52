"""The Store protocol: where ctxproxy keeps every piece of state another replica needs.

Session records, checkpoints and (later) memories live in a ``Store``, never only in
process memory, so any proxy process sharing the store can pick a conversation up.

Contract every backend keeps (``tests/store/contract`` tests it on every backend, but for the
failures only a backend's own tests can cause: a full disk, a database locked by another process):

* Values are JSON-like (``JSONValue``) and come back as plain ``dict`` / ``list`` / ``str``
  / ``int`` / ``float`` / ``bool``; tuples come back as lists. ``None`` means *absent*:
  storing ``None`` (via ``put``, ``update`` or ``compare_and_set``) deletes the key.
* ``update``, ``update_many`` and ``compare_and_set`` are atomic read-modify-write operations,
  also between processes and machines sharing the backend. ``update``'s ``fn`` computes the new
  value from the current one: ``DiskStore`` calls it once, under its write lock; ``RedisStore``
  once per attempt of an optimistic transaction, so again when another writer changed the key
  in between. Keep it pure (what it returns is all it does; a function that reports something
  keeps only its last run's report) and fast.
* A stored entry that cannot be read back (corrupt bytes, a vanished value file, ...) is
  logged as ``store.corrupt_entry`` and treated as absent; it never fails a request.
* A backend-wide failure (database error, disk full, permission denied, timeout waiting
  for the write lock, a server that cannot be reached) raises ``StoreError`` naming the operation
  and the key (``StoreUnavailable`` for one failed at once during a known outage). Errors that
  are the caller's fault (a value that is not JSON, an exception raised by ``fn``, a
  non-positive ttl) propagate unchanged.
* ``lock`` returns a lease: a mutual-exclusion lock that holds a random owner token and
  expires ``ttl`` seconds after it was acquired or last renewed, so a holder that crashed or
  hangs never blocks others for longer than ``ttl``. Keep ``ttl`` short and ``renew`` while the
  work lasts (``ctxproxy.store.lease.renewed`` does it every ``ttl / 3``). A backend that can tell
  that a holder's process is gone (``DiskStore``: same host, dead pid) lets the next ``acquire``
  take the lease over at once; one that cannot (a network store) relies on expiry. A backend
  needs nothing more than a conditional write with expiry: set-if-absent with a ttl to acquire,
  compare-owner-then-extend to renew, compare-owner-then-delete to release.
* Each acquisition of a lease gets a *fencing token* (``StoreLock.fence``): a number greater
  than that of every earlier acquisition of any lease of the store, by any process. A holder
  that writes what its lease protects records its fence with the write (in the same atomic
  ``update``) and a write with a smaller fence than the one recorded is refused: a holder that
  lost its lease (it hung past the ttl, and another took over) never overwrites the newer
  holder's work. That check is the writer's (``ctxproxy.compaction.checkpoints``); the store
  only hands out the numbers.
* ``check_writable`` fails while the store cannot take writes, judged by a probe write *and*
  by the backend's real operations: after a real write failed, the probe writes as many bytes
  as that write did, so a store that takes only small writes still counts as failing, and one
  that works again counts as working at once.
* Key namespacing is the caller's job: every key ctxproxy uses is spelled in
  ``ctxproxy.store.keys``, which also names the prefix a backend keeps for its own records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Protocol, TypeAlias

__all__ = ["JSONValue", "LockTimeout", "Store", "StoreError", "StoreLock", "StoreUnavailable", "UpdateFn"]

JSONValue: TypeAlias = dict[str, Any] | list[Any] | str | int | float | bool | None

UpdateFn: TypeAlias = Callable[[JSONValue | None], JSONValue | None]
"""Gets the current value (``None`` if missing or corrupt), returns the new one (``None`` deletes)."""


class StoreError(Exception):
    """The backend failed (disk full, sqlite error, ...); the message says what and which key."""


class LockTimeout(StoreError):
    """A blocking lock acquisition gave up."""


class StoreUnavailable(StoreError):
    """The store is known to be unreachable (an outage its backend is tracking), so the operation
    was not even tried. The backend logs the outage itself, once per interval, with a count of
    these: a caller need not log each one (``ctxproxy.store.outage.warn_store_failure``)."""


class StoreLock(Protocol):
    """A lease on one key: at most one owner at a time, until ``release`` or expiry."""

    @property
    def key(self) -> str: ...

    @property
    def ttl(self) -> float:
        """Seconds the lease lasts after ``acquire`` or ``renew``."""
        ...

    @property
    def held(self) -> bool:
        """True while this object owns the lock (acquired, not released, not expired)."""
        ...

    @property
    def fence(self) -> int | None:
        """The fencing token of the latest acquisition by this object (see the module docstring);
        None before the first one."""
        ...

    async def acquire(self, *, blocking: bool = True, timeout: float | None = None) -> bool:
        """Non-blocking: one try. Blocking: retry with backoff until acquired or ``timeout``.
        ``RuntimeError`` if this object holds the lock already."""
        ...

    async def renew(self) -> bool:
        """Extend the lease to ``ttl`` seconds from now if this object still owns it; False
        (and not held any more) if it was lost: expired, and maybe taken by another owner."""
        ...

    async def release(self) -> None:
        """Give the lock up if this object still owns it; otherwise do nothing. If the backend
        fails, ``StoreError`` is raised and the lease ends by expiry (or sooner: a backend that
        knows its own abandoned leases lets the next ``acquire`` take them over)."""
        ...

    async def __aenter__(self) -> StoreLock:
        """Blocking acquire with ``timeout=ttl``; raises ``LockTimeout`` on failure."""
        ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class Store(Protocol):
    """Async key/value store for JSON-like values; see the module docstring for guarantees."""

    async def get(self, key: str) -> JSONValue | None:
        """The stored value, or ``None`` if missing, expired or corrupt."""
        ...

    async def get_bytes(self, key: str) -> bytes | None:
        """The stored value as the JSON bytes the backend holds, or ``None`` if missing, expired or
        not bytes (reported as corrupt, as ``get`` does). Bytes that are not JSON come back as they
        are: ``ctxproxy.store.values.decode`` reads them as ``get`` would. For a caller that keeps
        what it decoded from a value and decodes only bytes that changed."""
        ...

    async def put(self, key: str, value: JSONValue, *, ttl: float | None = None) -> None:
        """Store ``value`` (``None`` deletes); ``ttl`` seconds until it expires, ``None`` = never."""
        ...

    async def delete(self, key: str) -> bool:
        """Remove ``key``; True if it existed."""
        ...

    async def update(self, key: str, fn: UpdateFn, *, ttl: float | None = None) -> JSONValue | None:
        """Atomically replace the value with ``fn(current)``; returns what was stored."""
        ...

    async def update_many(self, updates: Mapping[str, UpdateFn], *, ttl: float | None = None) -> None:
        """``update`` for several keys in one atomic step (one transaction, one round trip); the
        functions are applied in the mapping's order, so a later one may use what an earlier
        one computed."""
        ...

    async def compare_and_set(
        self, key: str, expected: JSONValue | None, new: JSONValue, *, ttl: float | None = None
    ) -> bool:
        """Atomically store ``new`` if the current value equals ``expected`` (``None`` = absent)."""
        ...

    async def keys(self, prefix: str) -> list[str]:
        """All live keys starting with ``prefix``, sorted."""
        ...

    def lock(self, key: str, *, ttl: float) -> StoreLock:
        """A lock named ``key`` (separate from the value stored under ``key``)."""
        ...

    async def check_writable(self) -> None:
        """Write, read back and delete a probe key (as large as the last failed real write);
        raise ``StoreError`` if that fails."""
        ...

    async def close(self) -> None:
        """Release resources; later calls raise ``StoreError``. Idempotent."""
        ...

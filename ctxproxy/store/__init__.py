"""State that must outlive a request or be shared between replicas.

``open_store(backend, path, ...)`` returns a ``Store`` (see ``ctxproxy.store.base`` for the contract
every backend keeps): ``"diskcache"`` (``DiskStore``, at ``path``) is the embedded default, for one
machine; ``"redis"`` (``RedisStore``, at ``url``) is shared by replicas on several machines. Every
key ctxproxy stores under is spelled in ``ctxproxy.store.keys``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from ctxproxy.store.base import JSONValue, LockTimeout, Store, StoreError, StoreLock, StoreUnavailable, UpdateFn
from ctxproxy.store.disk import DiskLock, DiskStore
from ctxproxy.store.keys import DEFAULT_KEY_PREFIX
from ctxproxy.store.outage import warn_store_failure
from ctxproxy.store.redis_url import check_url, redacted

__all__ = [
    "BACKENDS",
    "DEFAULT_KEY_PREFIX",
    "DiskLock",
    "DiskStore",
    "JSONValue",
    "LockTimeout",
    "Store",
    "StoreError",
    "StoreLock",
    "StoreOptions",
    "StoreUnavailable",
    "UpdateFn",
    "check_options",
    "existing_store",
    "open_store",
    "warn_store_failure",
]


@dataclass(frozen=True)
class StoreOptions:
    """Where a store is and how to reach it; each backend reads the fields it needs."""

    path: str | os.PathLike[str] = "data"
    url: str | None = None
    key_prefix: str = DEFAULT_KEY_PREFIX
    pool_size: int = 32
    timeout: float = 2.0
    connect_timeout: float = 2.0


def _open_disk(options: StoreOptions) -> Store:
    return DiskStore(options.path)


def _open_redis(options: StoreOptions) -> Store:
    from ctxproxy.store.redis_store import RedisStore  # the client library only where it is used

    assert options.url is not None  # check_options
    return RedisStore(
        options.url,
        key_prefix=options.key_prefix,
        pool_size=options.pool_size,
        timeout=options.timeout,
        connect_timeout=options.connect_timeout,
    )


_OPENERS: Mapping[str, Callable[[StoreOptions], Store]] = {"diskcache": _open_disk, "redis": _open_redis}
_NEEDS_URL: Final = frozenset({"redis"})
BACKENDS: Final = tuple(_OPENERS)


def existing_store(backend: str, path: str | os.PathLike[str], url: str | None) -> str | None:
    """Where the configured store is (its directory, or its server's URL without the password),
    or None when opening it would create it (a diskcache directory that is not there yet)."""
    if backend in _NEEDS_URL:
        return redacted(url) if url else None
    return str(path) if os.path.isdir(path) else None


def check_options(backend: str, url: str | None) -> None:
    """``ValueError`` saying what is wrong when ``backend`` cannot be opened with ``url``."""
    if backend not in _OPENERS:
        raise ValueError(f"unknown store backend {backend!r}; allowed backends: {', '.join(BACKENDS)}")
    if backend in _NEEDS_URL and not url:
        raise ValueError(f'the {backend} store needs a url, e.g. url = "redis://HOST:6379/0" or "${{REDIS_URL}}"')
    if url:
        check_url(url)


def open_store(
    backend: str,
    path: str | os.PathLike[str] = "data",
    *,
    url: str | None = None,
    key_prefix: str = DEFAULT_KEY_PREFIX,
    pool_size: int = 32,
    timeout: float = 2.0,
    connect_timeout: float = 2.0,
) -> Store:
    """Open the store named by ``backend``: at ``path`` (diskcache) or at ``url`` (redis; see
    ``StoreOptions``). ``ValueError`` for an unknown backend or a missing option; ``StoreError`` if
    it cannot be opened. Opening does not reach a network store: ``check_writable`` does."""
    check_options(backend, url)
    return _OPENERS[backend](StoreOptions(path, url, key_prefix, pool_size, timeout, connect_timeout))

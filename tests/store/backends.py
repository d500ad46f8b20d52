"""The Store backends the contract suite (``tests/store/contract``) runs against.

Every contract test takes the ``store`` fixture (or ``stores``, to open more instances), which is
parametrised over ``BACKENDS`` (diskcache and Redis): a new backend joins the whole suite by
adding one ``Backend`` to that tuple, and ``test_every_backend_is_under_contract`` fails until it
does. A backend brings two functions:

* ``open(place)``: a new instance of the store kept at ``place``, a fresh directory per test. Two
  opens of one place are two instances sharing one state (diskcache: two ``DiskStore`` objects on
  one directory; a network store: two clients of one server under a namespace derived from
  ``place``). It is called in spawned child processes too (``open_backend(name, place)``), so it
  must be a module-level function. A backend whose server is not reachable calls
  ``pytest.skip`` here.
* ``plant_corrupt(place, key)``: store an entry under ``key`` that the backend cannot decode,
  through the backend's own client, as a damaged or foreign write would.
* ``server``: the fixture that runs the backend's server, if it has one (Redis: a real
  ``redis-server``, ``tests/redis_server.py``); the contract's fixtures start it and put its URL in
  ``REDIS_URL_ENV``, where ``open`` reads it (in child processes too, which inherit it).

What only one backend promises (DiskStore's file corruption, dead-pid takeover, full disks) is
tested beside the other ``tests/store/test_store_*.py`` files, not here.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import diskcache
import redis

from ctxproxy.store import Store, open_store

REDIS_URL_ENV = "CTXPROXY_TEST_REDIS_URL"


@dataclass(frozen=True)
class Backend:
    name: str
    open: Callable[[Path], Store]
    plant_corrupt: Callable[[Path, str], None]
    server: str | None = None

    def __str__(self) -> str:
        return self.name


def _diskcache_dir(place: Path) -> Path:
    return place / "diskcache"


def _open_diskcache(place: Path) -> Store:
    return open_store("diskcache", _diskcache_dir(place))


def _corrupt_diskcache(place: Path, key: str) -> None:
    raw = diskcache.Cache(str(_diskcache_dir(place)))
    try:
        raw.set(key, b"\xff\xfe not json")
    finally:
        raw.close()


def _redis_prefix(place: Path) -> str:
    """A namespace of its own for each test's ``place``, on the one server of the session."""
    return f"test:{hashlib.blake2b(str(place).encode(), digest_size=8).hexdigest()}:"


def _open_redis(place: Path) -> Store:
    return open_store("redis", url=os.environ[REDIS_URL_ENV], key_prefix=_redis_prefix(place))


def _corrupt_redis(place: Path, key: str) -> None:
    with redis.Redis.from_url(os.environ[REDIS_URL_ENV]) as raw:
        raw.set(_redis_prefix(place) + key, b"\xff\xfe not json")


BACKENDS: tuple[Backend, ...] = (
    Backend("diskcache", _open_diskcache, _corrupt_diskcache),
    Backend("redis", _open_redis, _corrupt_redis, server="redis_server"),
)


def open_backend(name: str, place: str | Path) -> Store:
    """``open`` of the backend called ``name`` (for child processes, which get names, not objects)."""
    (backend,) = (b for b in BACKENDS if b.name == name)
    return backend.open(Path(place))

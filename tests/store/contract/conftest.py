"""Fixtures of the Store contract suite: each test runs once per backend in ``tests.store.backends``,
and again through ``CountingStore`` (``ctxproxy.metrics.store``), the wrapper the app puts around
its store, which must keep the same contract."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from ctxproxy.metrics import CountingStore
from ctxproxy.store import Store
from tests.redis_server import RedisServer, redis_server  # noqa: F401 (a fixture)
from tests.store.backends import BACKENDS, REDIS_URL_ENV, Backend


@pytest.fixture(params=BACKENDS, ids=str)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    backend: Backend = request.param
    if backend.server is not None:
        server: RedisServer = request.getfixturevalue(backend.server)
        monkeypatch.setenv(REDIS_URL_ENV, server.url)
    return backend


@pytest.fixture
def place(tmp_path: Path) -> Path:
    """Where the test's store is kept; every instance opened on it shares its state."""
    return tmp_path


@pytest.fixture(params=[False, True], ids=["bare", "counted"])
def counted(request: pytest.FixtureRequest) -> bool:
    """Whether the store is opened inside ``CountingStore``."""
    return bool(request.param)


@pytest.fixture
async def stores(backend: Backend, place: Path, counted: bool) -> AsyncIterator[Callable[[], Store]]:
    """Opens another instance on the test's ``place``; every one is closed at the end."""
    opened: list[Store] = []
    errors: list[str] = []

    def open_one() -> Store:
        store = backend.open(place)
        opened.append(CountingStore(store, errors.append) if counted else store)
        return opened[-1]

    yield open_one
    for store in opened:
        await store.close()


@pytest.fixture
def store(stores: Callable[[], Store]) -> Store:
    return stores()

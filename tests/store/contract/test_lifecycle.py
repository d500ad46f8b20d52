"""Store contract: what outlives an instance, ``check_writable``, ``close``, and corrupt entries."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import ctxproxy.store
from ctxproxy.store import Store, StoreError
from ctxproxy.store.values import decode
from tests.store.backends import BACKENDS, Backend


def test_every_backend_is_under_contract() -> None:
    assert sorted(backend.name for backend in BACKENDS) == sorted(ctxproxy.store.BACKENDS)


async def test_another_instance_sees_what_one_wrote_also_after_it_closed(stores: Callable[[], Store]) -> None:
    first, second = stores(), stores()
    await first.put("k", {"v": 1})
    assert await second.get("k") == {"v": 1}
    await first.close()
    await second.put("k", {"v": 2})
    assert await stores().get("k") == {"v": 2}


async def test_check_writable_passes_on_a_working_store_and_leaves_no_key(store: Store) -> None:
    await store.check_writable()
    await store.check_writable()
    assert await store.keys("") == []


CALLS: dict[str, Callable[[Store], Awaitable[Any]]] = {
    "get": lambda s: s.get("k"),
    "put": lambda s: s.put("k", 1),
    "delete": lambda s: s.delete("k"),
    "update": lambda s: s.update("k", lambda _: 1),
    "update_many": lambda s: s.update_many({"k": lambda _: 1}),
    "compare_and_set": lambda s: s.compare_and_set("k", None, 1),
    "keys": lambda s: s.keys("k"),
    "lock.acquire": lambda s: s.lock("k", ttl=5).acquire(blocking=False),
    "check_writable": lambda s: s.check_writable(),
}


async def test_close_is_idempotent_and_every_later_call_raises_store_error(store: Store) -> None:
    await store.put("k", 1)
    await store.close()
    await store.close()
    for operation, call in CALLS.items():
        with pytest.raises(StoreError, match=operation):
            await call(store)
    with pytest.raises(StoreError, match="get failed"):  # a get, of the bytes
        await store.get_bytes("k")


async def test_a_corrupt_entry_reads_as_absent_is_logged_and_is_not_deleted(
    backend: Backend, place: Path, store: Store
) -> None:
    for key in ("bad:get", "bad:update", "bad:cas"):
        backend.plant_corrupt(place, key)
    with capture_logs() as logs:
        assert await store.get("bad:get") is None
        raw = await store.get_bytes("bad:get")  # reported again, or bytes that are not JSON
        assert raw is None or decode("bad:get", raw) is None
        seen: list[Any] = []

        def fix(current: Any) -> str:
            seen.append(current)
            return "fixed"

        assert await store.update("bad:update", fix) == "fixed"
        assert await store.compare_and_set("bad:cas", None, "fixed") is True
    assert seen == [None]
    corrupt = [e for e in logs if e["event"] == "store.corrupt_entry"]
    assert sorted(e["key"] for e in corrupt) == ["bad:cas", "bad:get", "bad:get", "bad:update"]
    assert all(e["log_level"] == "warning" for e in corrupt)
    assert "not json" not in repr(logs)  # never the value
    assert await store.keys("bad:") == ["bad:cas", "bad:get", "bad:update"]  # reported, not removed
    assert await store.get("bad:update") == await store.get("bad:cas") == "fixed"

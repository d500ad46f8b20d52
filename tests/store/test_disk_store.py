"""DiskStore against real diskcache directories, including several processes at once."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import sqlite3
import time
from pathlib import Path

import diskcache
import pytest
from structlog.testing import capture_logs

from proxy.store import DiskStore, LockTimeout, StoreError, open_store

VALUES = [{"a": [1, 2.5, None, True]}, [1, "two"], "text", 7, 3.25, False]


@pytest.fixture
async def store(tmp_path: Path):
    s = DiskStore(tmp_path / "store")
    yield s
    await s.close()


@pytest.mark.parametrize("value", VALUES)
async def test_roundtrip(store: DiskStore, value) -> None:
    await store.put("k", value)
    assert await store.get("k") == value


async def test_missing_and_delete(store: DiskStore) -> None:
    assert await store.get("nope") is None
    await store.put("k", 1)
    assert await store.delete("k") is True
    assert await store.delete("k") is False
    assert await store.get("k") is None


async def test_ttl_expires(store: DiskStore) -> None:
    await store.put("short", "x", ttl=0.2)
    await store.put("long", "y", ttl=60)
    await asyncio.sleep(0.4)
    assert await store.get("short") is None
    assert await store.get("long") == "y"


async def test_update_creates_modifies_deletes(store: DiskStore) -> None:
    assert await store.update("n", lambda v: (v or 0) + 1) == 1
    assert await store.update("n", lambda v: v + 10) == 11
    assert await store.get("n") == 11
    assert await store.update("n", lambda v: None) is None
    assert await store.get("n") is None


async def test_compare_and_set(store: DiskStore) -> None:
    assert await store.compare_and_set("c", None, {"v": 1}) is True
    assert await store.compare_and_set("c", None, {"v": 2}) is False
    assert await store.compare_and_set("c", {"v": 1}, {"v": 3}) is True
    assert await store.get("c") == {"v": 3}


async def test_keys_by_prefix(store: DiskStore) -> None:
    for key in ("ctx:a:2", "ctx:b:1", "ctx:a:1", "other"):
        await store.put(key, 0)
    assert await store.keys("ctx:a:") == ["ctx:a:1", "ctx:a:2"]


# -- across processes ------------------------------------------------------------------------


def _increment(path: str, times: int) -> None:
    async def run() -> None:
        s = DiskStore(path)
        for _ in range(times):
            await s.update("counter", lambda v: (v or 0) + 1)
        await s.close()

    asyncio.run(run())


def _contend(path: str, name: str, start, results) -> None:
    async def run() -> None:
        s = DiskStore(path)
        start.wait()
        results.put((name, await s.compare_and_set("owner", "free", name)))
        await s.close()

    asyncio.run(run())


def _hold_lock(path: str, acquired, release) -> None:
    async def run() -> None:
        s = DiskStore(path)
        lock = s.lock("session-1", ttl=30)
        assert await lock.acquire(blocking=False)
        acquired.set()
        await asyncio.get_running_loop().run_in_executor(None, release.wait, 20)
        await lock.release()
        await s.close()

    asyncio.run(run())


def test_update_is_atomic_across_processes(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_increment, args=(str(tmp_path), 50)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0

    async def read() -> object:
        s = DiskStore(tmp_path)
        try:
            return await s.get("counter")
        finally:
            await s.close()

    assert asyncio.run(read()) == 200


def test_compare_and_set_race_has_one_winner(tmp_path: Path) -> None:
    asyncio.run(_put(tmp_path, "owner", "free"))
    ctx = mp.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_contend, args=(str(tmp_path), f"p{i}", start, results)) for i in range(4)]
    for p in procs:
        p.start()
    start.set()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
    winners = [name for name, won in outcomes if won]
    assert len(winners) == 1


async def _put(path: Path, key: str, value) -> None:
    s = DiskStore(path)
    await s.put(key, value)
    await s.close()


async def test_lock_held_in_another_process(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    acquired, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold_lock, args=(str(tmp_path), acquired, release))
    child.start()
    try:
        assert await asyncio.to_thread(acquired.wait, 30)
        store = DiskStore(tmp_path)
        lock = store.lock("session-1", ttl=30)
        assert await lock.acquire(blocking=False) is False
        release.set()
        assert await lock.acquire(blocking=True, timeout=20) is True
        await lock.release()
        await store.close()
    finally:
        release.set()
        await asyncio.to_thread(child.join, 30)
    assert child.exitcode == 0


# -- locks in one process ------------------------------------------------------------------------


async def test_lock_single_flight_and_release(store: DiskStore) -> None:
    first, second = store.lock("s", ttl=30), store.lock("s", ttl=30)
    assert await first.acquire(blocking=False)
    assert first.held
    assert await second.acquire(blocking=False) is False
    await first.release()
    assert not first.held
    assert await second.acquire(blocking=False)
    await second.release()


async def test_expired_lock_can_be_taken_and_old_owner_cannot_release_it(store: DiskStore) -> None:
    crashed = store.lock("s", ttl=0.2)
    assert await crashed.acquire(blocking=False)
    await asyncio.sleep(0.3)
    taker = store.lock("s", ttl=30)
    assert await taker.acquire(blocking=False)
    await crashed.release()  # its lease expired: must not delete the new owner's lock
    third = store.lock("s", ttl=30)
    assert await third.acquire(blocking=False) is False
    await taker.release()


async def test_blocking_acquire_times_out(store: DiskStore) -> None:
    holder = store.lock("s", ttl=30)
    await holder.acquire()
    started = time.monotonic()
    assert await store.lock("s", ttl=30).acquire(blocking=True, timeout=0.3) is False
    assert time.monotonic() - started >= 0.29
    await holder.release()


async def test_lock_context_manager(store: DiskStore) -> None:
    async with store.lock("s", ttl=0.3) as lock:
        assert lock.held
        with pytest.raises(LockTimeout):
            async with store.lock("s", ttl=0.1):
                pass
    assert await store.lock("s", ttl=1).acquire(blocking=False)


# -- corruption and failure -------------------------------------------------------------------


async def test_corrupt_entries_are_skipped_and_reported(tmp_path: Path) -> None:
    raw = diskcache.Cache(str(tmp_path))
    raw.set("garbage", b"\xff\xfenot json")
    raw.set("pickled", {"a": 1})  # a pickled object, not our JSON bytes
    raw.close()
    store = DiskStore(tmp_path)
    with capture_logs() as logs:
        assert await store.get("garbage") is None
        assert await store.get("pickled") is None
        seen = []
        assert await store.update("garbage", lambda v: seen.append(v) or {"fixed": True}) == {"fixed": True}
    assert seen == [None]
    assert await store.get("garbage") == {"fixed": True}
    corrupt = [e for e in logs if e["event"] == "store.corrupt_entry"]
    assert {e["key"] for e in corrupt} == {"garbage", "pickled"}
    assert all("not json" not in repr(e) for e in logs)  # values are never logged
    await store.close()


async def test_large_values_stay_in_the_database(tmp_path: Path) -> None:
    # diskcache normally spills large values to separate files that can vanish independently
    # of their index row; the store keeps every value inside SQLite instead.
    store = DiskStore(tmp_path)
    await store.put("big", {"blob": "x" * 2_000_000})
    assert [p for p in tmp_path.rglob("*.val")] == []
    assert len((await store.get("big"))["blob"]) == 2_000_000
    await store.close()


async def test_locked_database_raises_store_error_then_recovers(tmp_path: Path) -> None:
    store = DiskStore(tmp_path, sqlite_timeout=0.2)
    await store.check_writable()
    other = sqlite3.connect(tmp_path / "cache.db", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another process holding the database
    try:
        with pytest.raises(StoreError, match="check_writable"):
            await store.check_writable()
        with pytest.raises(StoreError, match="put failed for key 'k'"):
            await store.put("k", 1)
    finally:
        other.execute("ROLLBACK")
        other.close()
    await store.put("k", 1)
    assert await store.get("k") == 1
    await store.close()


def test_open_store_backends(tmp_path: Path) -> None:
    assert isinstance(open_store("diskcache", tmp_path), DiskStore)
    with pytest.raises(ValueError, match="diskcache"):
        open_store("redis", tmp_path)

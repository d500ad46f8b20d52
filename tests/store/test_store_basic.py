"""DiskStore specifics in one process: JSON bytes on disk, reserved keys, foreign keys, open_store.

What every backend guarantees is tested in ``tests/store/contract`` (which runs on DiskStore too).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import diskcache
import pytest

from ctxproxy.store import DiskStore, Store, StoreError, open_store
from ctxproxy.store.keys import lease_record_key, probe_key


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[DiskStore]:
    s = DiskStore(tmp_path / "store")
    yield s
    await s.close()


async def test_values_are_stored_as_json_bytes(tmp_path: Path, store: DiskStore) -> None:
    await store.put("k", {"b": 1, "a": [True]})
    raw = diskcache.Cache(str(tmp_path / "store"))
    try:
        assert raw.get("k") == b'{"b":1,"a":[true]}'
    finally:
        raw.close()


@pytest.mark.parametrize("key", [lease_record_key("x"), probe_key("00"), "__store__:"])
async def test_the_stores_own_keys_are_refused(store: DiskStore, key: str) -> None:
    with pytest.raises(ValueError, match="reserved"):
        await store.put(key, 1)
    with pytest.raises(ValueError, match="reserved"):
        await store.get(key)
    with pytest.raises(ValueError, match="reserved"):
        await store.update_many({"fine": lambda _: 1, key: lambda _: 1})
    assert await store.keys("") == []


async def test_keys_skips_lease_records_and_keys_that_are_not_str(tmp_path: Path, store: DiskStore) -> None:
    await store.put("ctx:a:1", 0)
    lease = store.lock("ctx:a:2", ttl=30)
    assert await lease.acquire(blocking=False)
    raw = diskcache.Cache(str(tmp_path / "store"))
    raw.set(b"ctx:a:bytes-key", b"0")
    raw.set(5, b"0")
    raw.close()
    assert await store.keys("") == ["ctx:a:1"]
    assert await store.keys("ctx:a:") == ["ctx:a:1"]
    await lease.release()


async def test_update_runs_fn_with_the_callers_context(store: DiskStore) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("request-1")
    assert await store.update("n", lambda v: var.get()) == "request-1"


async def test_a_closed_store_names_the_reason(tmp_path: Path) -> None:
    from ctxproxy.store import StoreError

    s = DiskStore(tmp_path)
    await s.close()
    with pytest.raises(StoreError, match="get failed for key 'k': the store is closed"):
        await s.get("k")


async def test_open_store_backends(tmp_path: Path) -> None:
    s: Store = open_store("diskcache", tmp_path / "new" / "dir")
    assert isinstance(s, DiskStore)
    await s.put("k", [1])
    assert await s.get("k") == [1]
    await s.close()
    with pytest.raises(ValueError, match=r"'memcached'.*allowed backends: diskcache, redis"):
        open_store("memcached", tmp_path)
    with pytest.raises(ValueError, match="the redis store needs a url"):
        open_store("redis", tmp_path)
    with pytest.raises(ValueError, match="a Redis URL starts with"):
        open_store("redis", url="http://cache:6379")


async def test_a_read_on_the_loop_does_not_wait_for_a_writer_of_another_process(tmp_path: Path) -> None:
    """``get`` runs on the caller's thread: while another connection holds the write lock in the
    middle of a transaction, the read answers at once with the committed value, and sees the
    new value as soon as it is committed."""
    first, second = DiskStore(tmp_path / "store"), DiskStore(tmp_path / "store")
    await first.put("k", {"v": 1})
    other = diskcache.Cache(str(tmp_path / "store"))
    try:
        with other.transact():  # BEGIN IMMEDIATE: the write lock, held
            other.set("k", b'{"v":2}')
            started = time.monotonic()
            assert await second.get("k") == {"v": 1}
            assert await second.get_bytes("k") == b'{"v":1}'
            assert time.monotonic() - started < 1.0  # the sqlite timeout is 5 s
        assert await second.get("k") == {"v": 2}
        assert await first.get_bytes("k") == b'{"v":2}'
    finally:
        other.close()
        await first.close()
        await second.close()
    with pytest.raises(StoreError, match="closed"):
        await first.get("k")


async def test_a_read_waits_for_a_write_of_its_key_still_queued_for_a_worker(tmp_path: Path) -> None:
    """Reads run on the caller's thread, writes in the workers: a read of a key this instance is
    writing waits for that write, even while every worker is busy and the write is not begun;
    a read of another key does not wait."""
    store = DiskStore(tmp_path / "store", max_workers=2)
    await store.put("k", 1)
    await store.put("other", 1)
    release = threading.Event()
    busy = [store._executor.submit(release.wait, 10) for _ in range(2)]  # every worker taken
    try:
        write = asyncio.ensure_future(store.put("k", 2))
        await asyncio.sleep(0)  # the write is queued behind the busy workers
        read = asyncio.ensure_future(store.get("k"))
        assert await store.get("other") == 1  # not held up
        await asyncio.sleep(0.05)
        assert not read.done()
        release.set()
        assert await read == 2
        await write
    finally:
        release.set()
        for future in busy:
            future.result()
        await store.close()

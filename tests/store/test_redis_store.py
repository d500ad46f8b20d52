"""What only ``RedisStore`` promises, against a real ``redis-server``: its key prefix, optimistic
transactions that run again when another writer interferes, the values' bytes, and what it does
when the server is down, hangs, or runs out of memory. What every backend promises is in
``tests/store/contract``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import orjson
import pytest
import redis
from structlog.testing import capture_logs

from ctxproxy.store import JSONValue, StoreError, StoreUnavailable, open_store
from ctxproxy.store.keys import lease_record_key
from ctxproxy.store.redis_store import RedisStore
from tests.redis_server import RedisServer, own_redis, redis_server  # noqa: F401 (fixtures)

Opener = Callable[..., RedisStore]


@pytest.fixture
async def opened() -> AsyncIterator[list[RedisStore]]:
    stores: list[RedisStore] = []
    yield stores
    for store in stores:
        await store.close()


@pytest.fixture
def shared(redis_server: RedisServer, opened: list[RedisStore], tmp_path: Path) -> Opener:  # noqa: F811
    """Opens stores on the session's server, in a namespace of this test's own by default."""

    def open_one(key_prefix: str = f"t{abs(hash(tmp_path))}:", **options: float) -> RedisStore:
        store = open_store("redis", url=redis_server.url, key_prefix=key_prefix, **options)  # type: ignore[arg-type]
        assert isinstance(store, RedisStore)
        opened.append(store)
        return store

    return open_one


@pytest.fixture
def raw(redis_server: RedisServer) -> redis.Redis:  # noqa: F811
    return redis.Redis.from_url(redis_server.url)


async def test_values_are_the_json_bytes_under_the_prefix_with_the_ttl_as_expiry(
    shared: Opener, raw: redis.Redis
) -> None:
    store = shared("app-1:")
    await store.put("ctx:t:k", {"b": [1, 2.5], "a": "ü"}, ttl=30)
    await store.put("ctx:t:forever", 1)
    assert raw.get("app-1:ctx:t:k") == orjson.dumps({"b": [1, 2.5], "a": "ü"})
    assert 29_000 < raw.pttl("app-1:ctx:t:k") <= 30_000
    assert raw.pttl("app-1:ctx:t:forever") == -1
    lock = store.lock("ctx:t:s", ttl=5)
    assert await lock.acquire(blocking=False)
    assert raw.exists("app-1:" + lease_record_key("ctx:t:s"))
    await lock.release()
    assert not raw.exists("app-1:" + lease_record_key("ctx:t:s"))


async def test_two_prefixes_on_one_server_never_see_each_others_keys(shared: Opener) -> None:
    first, second, star = shared("team-a:"), shared("team-b:"), shared("team-*:")
    await first.put("k", "a")
    await second.put("k", "b")
    assert [await first.get("k"), await second.get("k"), await star.get("k")] == ["a", "b", None]
    assert await first.keys("") == ["k"]
    assert await star.keys("") == []  # '*' in a prefix is a character, not a pattern
    await star.put("k[1]", "x")
    assert await star.keys("k[") == ["k[1]"]
    assert await first.keys("") == ["k"]


async def test_an_update_interrupted_by_another_writer_runs_again_on_the_new_value(
    shared: Opener, raw: redis.Redis
) -> None:
    store = shared("interrupted:")
    await store.put("n", 1)
    seen: list[JSONValue | None] = []

    def bump(value: JSONValue | None) -> JSONValue:
        seen.append(value)
        if len(seen) == 1:  # another replica writes between this read and this write
            raw.set("interrupted:n", b"10")
        assert isinstance(value, int)
        return value + 1

    assert await store.update("n", bump) == 11
    assert seen == [1, 10]
    assert await store.get("n") == 11


async def test_a_key_of_another_redis_type_reads_as_absent_and_is_logged(shared: Opener, raw: redis.Redis) -> None:
    store = shared("typed:")
    raw.hset("typed:h", mapping={"a": "1"})
    with capture_logs() as logs:
        assert await store.get("h") is None
    assert [(e["event"], e["key"]) for e in logs] == [("store.corrupt_entry", "h")]
    assert await store.update("h", lambda current: {"was": current}) == {"was": None}
    assert await store.get("h") == {"was": None}
    raw.delete("typed:h")


async def test_a_server_that_is_down_fails_fast_is_logged_once_and_is_used_again_when_back(
    own_redis: RedisServer,  # noqa: F811
    opened: list[RedisStore],
) -> None:
    store = open_store("redis", url=own_redis.url, timeout=1.0)
    assert isinstance(store, RedisStore)
    opened.append(store)
    await store.put("k", "before")
    own_redis.stop()
    with capture_logs() as logs:
        with pytest.raises(StoreError, match=r"get failed for key 'k': ConnectionError"):
            await store.get("k")
        for _ in range(50):  # during the outage's cooldown: at once, without the server
            with pytest.raises(StoreUnavailable, match=r"put failed for key 'k2': the store at redis://127\.0\.0\.1"):
                await store.put("k2", 1)
        with pytest.raises(StoreError, match="check_writable failed"):
            await store.check_writable()  # /readyz always asks the server
    assert [e["event"] for e in logs] == ["store.unreachable"]
    assert "password" not in repr(logs)
    own_redis.start()

    async def works() -> bool:
        try:
            await store.put("k2", "after")
        except StoreError:
            await asyncio.sleep(0.1)
            return False
        return True

    with capture_logs() as logs:
        deadline = time.monotonic() + 10
        while not await works():
            assert time.monotonic() < deadline, "the store never used the server again"
    assert [e["event"] for e in logs] == ["store.reachable_again"]
    assert await store.get("k2") == "after"
    await store.check_writable()


async def test_a_server_that_hangs_times_out_each_command_and_recovers(
    own_redis: RedisServer,  # noqa: F811
    opened: list[RedisStore],
) -> None:
    store = open_store("redis", url=own_redis.url, timeout=0.3)
    opened.append(store)  # type: ignore[arg-type]
    await store.put("k", 1)
    own_redis.pause()
    try:
        with pytest.raises(StoreError, match="update failed for key 'k': TimeoutError"):
            await asyncio.wait_for(store.update("k", lambda v: 2), 10)  # the command's timeout, not forever
    finally:
        own_redis.resume()
    await asyncio.sleep(1.1)  # the outage's cooldown: the next command tries the server again
    assert await store.update("k", lambda v: 3) == 3
    assert await store.get("k") == 3


async def test_a_full_server_fails_large_writes_and_check_writable_until_there_is_room(
    own_redis: RedisServer,  # noqa: F811
    opened: list[RedisStore],
) -> None:
    store = open_store("redis", url=own_redis.url)
    opened.append(store)  # type: ignore[arg-type]
    raw = redis.Redis.from_url(own_redis.url)
    raw.config_set("maxmemory-policy", "noeviction")
    raw.set("ballast", b"x" * 4_000_000)
    used = int(raw.info("memory")["used_memory"])
    raw.config_set("maxmemory", used + 200_000)  # room for small writes, not for a 1 MB checkpoint
    await store.put("small", "fits")
    with pytest.raises(StoreError, match="put failed for key 'big': OutOfMemoryError"):
        await store.put("big", "y" * 1_000_000)
    with pytest.raises(StoreError, match="OutOfMemoryError"):
        await store.check_writable()  # probes with as many bytes as the failed write
    raw.delete("ballast")
    await store.check_writable()
    await store.put("big", "y" * 1_000_000)
    raw.close()

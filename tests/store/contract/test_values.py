"""Store contract: JSON values, what ``None`` means, ttl, and ``keys``."""

from __future__ import annotations

import time

import orjson
import pytest

from ctxproxy.store import JSONValue, Store
from tests.store.contract.polling import eventually

JSON_VALUES: list[JSONValue] = [
    {"a": [1, 2.5, None, True], "nested": {"k": "v"}},
    {},
    [1, "two", {"three": 3}],
    [],
    "text with ünïcode ✓",
    "",
    0,
    -7,
    2**62,
    3.25,
    True,
    False,
]


@pytest.mark.parametrize("value", JSON_VALUES, ids=repr)
async def test_each_json_type_round_trips(store: Store, value: JSONValue) -> None:
    await store.put("k", value)
    got = await store.get("k")
    assert got == value
    assert type(got) is type(value)


async def test_the_bytes_held_are_the_json_a_get_reads(store: Store) -> None:
    assert await store.get_bytes("missing") is None
    for value in JSON_VALUES:
        await store.put("k", value)
        raw = await store.get_bytes("k")
        assert raw is not None and orjson.loads(raw) == await store.get("k") == value
    await store.update("k", lambda _: {"b": 1, "a": 1.0})
    assert await store.get_bytes("k") == orjson.dumps({"b": 1, "a": 1.0})  # as written: order and types kept


async def test_tuples_come_back_as_lists(store: Store) -> None:
    await store.put("put", {"pair": (1, (2, "three"))})
    await store.update("update", lambda _: ("a", "b"))  # type: ignore[arg-type,return-value]
    await store.compare_and_set("cas", None, ((1,),))  # type: ignore[arg-type]
    assert await store.get("put") == {"pair": [1, [2, "three"]]}
    assert await store.get("update") == ["a", "b"]
    assert await store.get("cas") == [[1]]


async def test_a_missing_key_reads_as_none_and_delete_says_whether_it_existed(store: Store) -> None:
    assert await store.get("nope") is None
    await store.put("k", 1)
    assert await store.delete("k") is True
    assert await store.delete("k") is False
    assert await store.get("k") is None


async def test_storing_none_deletes(store: Store) -> None:
    for key in ("put", "update", "cas"):
        await store.put(key, "x")
    await store.put("put", None)
    assert await store.update("update", lambda _: None) is None
    assert await store.compare_and_set("cas", "x", None) is True
    assert await store.update("never", lambda _: None) is None
    assert await store.keys("") == []


async def test_a_value_that_is_not_json_is_refused_and_nothing_stored(store: Store) -> None:
    with pytest.raises(TypeError):
        await store.put("k", {"s": {1, 2}})
    with pytest.raises(TypeError):
        await store.compare_and_set("k", None, {"o": object()})
    assert await store.get("k") is None


async def test_a_ttl_that_is_not_positive_is_refused(store: Store) -> None:
    for ttl in (0, -1):
        with pytest.raises(ValueError, match="ttl"):
            await store.put("k", 1, ttl=ttl)
        with pytest.raises(ValueError, match="ttl"):
            await store.update("k", lambda _: 1, ttl=ttl)
        with pytest.raises(ValueError, match="ttl"):
            await store.update_many({"k": lambda _: 1}, ttl=ttl)
        with pytest.raises(ValueError, match="ttl"):
            await store.compare_and_set("k", None, 1, ttl=ttl)
        with pytest.raises(ValueError, match="ttl"):
            store.lock("k", ttl=ttl)
    assert await store.keys("") == []


async def test_every_write_with_a_ttl_expires_after_it(store: Store) -> None:
    ttl = 0.3
    started = time.monotonic()
    await store.put("put", "x", ttl=ttl)
    await store.update("update", lambda _: "x", ttl=ttl)
    await store.update_many({"many-1": lambda _: "x", "many-2": lambda _: "x"}, ttl=ttl)
    await store.compare_and_set("cas", None, "x", ttl=ttl)
    await store.put("long", "y", ttl=60)
    await store.put("forever", "z")
    short = ["cas", "many-1", "many-2", "put", "update"]
    assert [await store.get(key) for key in short] == ["x"] * len(short)

    async def all_gone() -> bool:
        return all([await store.get(key) is None for key in short])

    await eventually(all_gone)
    assert time.monotonic() - started >= ttl - 0.05  # not before its time
    assert await store.keys("") == ["forever", "long"]
    assert await store.delete("put") is False
    assert await store.compare_and_set("cas", None, "again") is True  # expired is absent


async def test_keys_lists_the_live_keys_with_the_prefix_sorted(store: Store) -> None:
    for key in ("ctx:b:1", "ctx:a:2", "ctx:a:10", "ctx:a:1", "ctx:a", "ctx:ä", "other", "ctx;"):
        await store.put(key, 0)
    await store.put("ctx:a:expired", 0, ttl=0.05)
    await store.put("ctx:a:deleted", 0)
    await store.delete("ctx:a:deleted")
    await eventually(lambda: _absent(store, "ctx:a:expired"))
    assert await store.keys("ctx:a:") == ["ctx:a:1", "ctx:a:10", "ctx:a:2"]
    assert await store.keys("ctx:") == ["ctx:a", "ctx:a:1", "ctx:a:10", "ctx:a:2", "ctx:b:1", "ctx:ä"]
    assert await store.keys("nothing") == []
    assert await store.keys("") == sorted(
        ["ctx:b:1", "ctx:a:2", "ctx:a:10", "ctx:a:1", "ctx:a", "ctx:ä", "other", "ctx;"]
    )


async def _absent(store: Store, key: str) -> bool:
    return await store.get(key) is None

"""``ctxproxy.cache``: the byte-bounded LRU every in-process cache uses, the budget's shares, and
the JSON size estimate they rely on."""

from __future__ import annotations

import sys
import tracemalloc
import typing

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.cache import ENTRY_BYTES, SHARES, ByteLRU, CacheName, CachePool, json_size


def test_least_recently_used_is_evicted_first() -> None:
    lru: ByteLRU[str, int] = ByteLRU(3 * (100 + ENTRY_BYTES))
    for key in "abc":
        assert lru.put(key, ord(key), 100)
    assert lru.get("a") == ord("a")  # a is now the most recently used
    assert "b" in lru  # membership does not refresh
    lru.put("d", 4, 100)
    assert "b" not in lru
    assert [k for k in "acd" if k in lru] == ["a", "c", "d"]
    lru.put("e", 5, 100)
    assert "c" not in lru and "a" in lru
    assert lru.nbytes == 3 * (100 + ENTRY_BYTES) == lru.max_bytes


def test_one_big_entry_evicts_as_many_as_it_needs() -> None:
    lru: ByteLRU[str, str] = ByteLRU(1000 + 4 * ENTRY_BYTES)
    for key in "abcd":
        lru.put(key, key, 250)
    lru.put("big", "x", 700)
    assert [k for k in ("a", "b", "c", "d", "big") if k in lru] == ["c", "d", "big"]
    assert lru.nbytes == 2 * 250 + 700 + 3 * ENTRY_BYTES == lru.max_bytes


def test_an_entry_over_the_whole_budget_is_not_kept() -> None:
    lru: ByteLRU[str, str] = ByteLRU(1000)
    assert lru.put("small", "s", 10)
    assert lru.put("k", "old", 10)
    assert not lru.put("k", "new", 1000)  # with the entry's own bytes it is over the budget
    assert "k" not in lru and lru.get("k") is None  # the older value is gone too
    assert lru.get("small") == "s"  # nothing else was evicted for it
    assert lru.nbytes == 10 + ENTRY_BYTES


def test_replacing_a_value_accounts_only_the_new_size() -> None:
    lru: ByteLRU[str, str] = ByteLRU(10_000)
    lru.put("k", "v1", 1000)
    lru.put("k", "v2", 300)
    assert lru.nbytes == 300 + ENTRY_BYTES and len(lru) == 1
    lru.put("k", "v3", 2000)
    assert lru.nbytes == 2000 + ENTRY_BYTES and lru.get("k") == "v3"
    assert lru.pop("k") == "v3" and lru.nbytes == 0 and len(lru) == 0
    assert lru.pop("k") is None


def test_max_entries_bounds_the_count_too() -> None:
    lru: ByteLRU[int, int] = ByteLRU(10**9, max_entries=2)
    for i in range(5):
        lru.put(i, i, 1)
    assert len(lru) == 2 and 3 in lru and 4 in lru
    none: ByteLRU[int, int] = ByteLRU(10**9, max_entries=0)
    assert not none.put(1, 1, 1) and len(none) == 0
    with pytest.raises(ValueError):
        ByteLRU(-1)


def test_pool_shares_never_add_up_to_more_than_the_budget() -> None:
    assert set(SHARES) == set(typing.get_args(CacheName))
    assert sum(SHARES.values()) == 100
    pool = CachePool(1_000_003)
    caches = {name: pool.lru(name) for name in SHARES}
    assert sum(cache.max_bytes for cache in caches.values()) <= pool.max_bytes
    for cache in caches.values():  # fill every cache well past its share
        for i in range(2 * cache.max_bytes // (1000 + ENTRY_BYTES)):
            cache.put(i, "x", 1000)
    assert pool.max_bytes - len(SHARES) * (1000 + ENTRY_BYTES) <= pool.nbytes <= pool.max_bytes
    assert pool.usage() == {name: cache.nbytes for name, cache in caches.items()}
    with pytest.raises(ValueError, match="known_conversations"):
        pool.lru("known_conversations")


@pytest.mark.parametrize(
    "value",
    [
        [{"role": "user", "content": "a short question"}, {"role": "assistant", "content": "a short answer"}] * 200,
        [{"role": "user", "content": "x" * 1_000_000}],
        [{"role": "user", "content": "é" * 100_000 + "🙂"}],  # one emoji: 4 bytes for every character
        [{"role": "user", "content": [{"type": "text", "text": "part"}, {"type": "image_url", "image_url": {}}]}] * 50,
    ],
    ids=["many-small", "one-large", "wide-chars", "parts"],
)
def test_json_size_covers_what_parsing_allocates(value: object) -> None:
    raw = orjson.dumps(value)
    tracemalloc.start()
    try:
        parsed = orjson.loads(raw)
        allocated, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    estimate = json_size(parsed)
    # Never under what CPython really holds; not wildly over it either (orjson shares keys).
    assert allocated <= estimate <= 2 * allocated + 1024


def test_json_size_of_deeply_nested_values_does_not_recurse() -> None:
    value: list[object] = []
    for _ in range(100_000):
        value = [value]
    assert json_size(value) >= 100_000 * 56


def _plain_json_size(value: object) -> int:
    """Every object pushed and popped in turn: the walk ``json_size`` shortens for scalars."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return total


class _Text(str):
    """A string of another type than str: walked as any object is."""


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.text().map(_Text),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=4) | st.integers() | st.tuples(st.integers()), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(JSON_VALUES)
def test_json_size_counts_what_walking_every_object_counts(value: object) -> None:
    assert json_size(value) == _plain_json_size(value)


_CHAT_MESSAGES = st.fixed_dictionaries(
    {"role": st.text(max_size=8) | JSON_VALUES, "content": st.text() | st.text().map(_Text) | JSON_VALUES},
    optional={"name": st.text(max_size=8) | JSON_VALUES, "z": JSON_VALUES},
)


@given(_CHAT_MESSAGES)
def test_a_role_and_its_text_measure_as_walking_them(message: dict[str, object]) -> None:
    """A message of strings (a role, its text, a name) is measured without the walk: as the walk measures it."""
    assert json_size(message) == _plain_json_size(message)


@given(st.text(max_size=8), st.text())
def test_a_parsed_role_and_text_measure_as_walking_them(role: str, content: str) -> None:
    parsed = orjson.loads(orjson.dumps({"role": role, "content": content}))  # the keys as a parser makes them
    assert json_size(parsed) == _plain_json_size(parsed)

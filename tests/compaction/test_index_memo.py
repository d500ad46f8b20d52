"""A session's checkpoint index is read from the Store at every request and decoded again only
when its bytes changed (``ctxproxy.compaction.index_memo``): what a request gets is what decoding
the value read gives, whoever wrote it — a compaction, a refusal, ``forget``, another process on
the same directory (Redis replicas: ``tests/redis/test_checkpoint_replicas.py``)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from ctxproxy.cache import ENTRY_BYTES, ByteLRU, CachePool
from ctxproxy.compaction.checkpoints import SessionIndex, with_checkpoint, with_refusal
from ctxproxy.compaction.index_memo import IndexMemo
from ctxproxy.compaction.views import SessionViews
from ctxproxy.session import SessionKey
from ctxproxy.store import JSONValue, Store, open_store
from ctxproxy.store.keys import checkpoints_key
from ctxproxy.strategies.base import Block, Checkpoint
from ctxproxy.strategies.paged.entries import ContentsEntry, encode_entries
from ctxproxy.strategies.registry import builtin_registry
from ctxproxy.tokens import TokenCounter

KEY = SessionKey("acme", "s1", "header")


def decoded_as_json(index: SessionIndex) -> bytes:
    """Everything a decoded index holds, with JSON's types kept apart (``1``, ``1.0``, ``true``)."""
    return orjson.dumps(
        {
            "checkpoints": [c.to_json() for c in index.checkpoints],
            "branches": [c.to_json() for c in index.branches],
            "refused": dict(index.refused),
            "types": [[type(c.made_for).__name__, type(c.end).__name__] for c in index.checkpoints],
        }
    )


# Equal as Python values, different as JSON: a memo keyed on ``==`` would mix them up.
COUNTS = st.sampled_from([None, 3, True, 3.0, "3", -1])


@st.composite
def checkpoint_json(draw: st.DrawFn) -> dict[str, Any]:
    end = draw(st.sampled_from([4, 9, 16]))
    raw: dict[str, Any] = {
        "end": end,
        "prefix_hash": f"{end:032x}",
        "blocks": [{"start": 1, "end": end, "text": draw(st.sampled_from(["a", "b"])), "kind": "history"}],
        "created_at": draw(st.sampled_from([1.0, 2.0, 2])),
        "summarizer": "extractive",
        "state": draw(st.sampled_from([{}, {"n": 1}, {"n": 1.0}, {"n": True}])),
    }
    made_for = draw(COUNTS)
    if made_for is not None:
        raw["made_for"] = made_for
    return dict(reversed(raw.items())) if draw(st.booleans()) else raw  # keys in another order


@st.composite
def index_values(draw: st.DrawFn) -> JSONValue | None:
    if draw(st.integers(0, 9)) == 0:
        return None  # forgotten
    value: dict[str, Any] = {"checkpoints": draw(st.lists(checkpoint_json(), max_size=3))}
    refused = draw(COUNTS)
    if refused is not None:
        value["refused"] = {"gpt-4o": refused}
    if draw(st.booleans()):
        value["branches"] = draw(st.lists(checkpoint_json(), max_size=1))
    return value


@settings(max_examples=300, deadline=None)
@given(st.lists(index_values(), min_size=1, max_size=10))
def test_an_index_read_again_is_what_decoding_it_gives(values: list[JSONValue | None]) -> None:
    memo = IndexMemo(ByteLRU(1 << 20))
    for value in values:
        stored = None if value is None else orjson.dumps(value)  # as a Store holds it
        got = memo.decoded("s1", "k", stored, SessionIndex.decode)
        assert decoded_as_json(got) == decoded_as_json(SessionIndex.decode(value))


def test_the_same_bytes_give_the_same_objects_and_other_bytes_a_new_decode() -> None:
    memo = IndexMemo(ByteLRU(1 << 20))
    decodes: list[JSONValue | None] = []

    def decode(value: JSONValue | None) -> SessionIndex:
        decodes.append(value)
        return SessionIndex.decode(value)

    stored = orjson.dumps(with_checkpoint(None, Checkpoint(9, "0" * 32, (Block(1, 9, "s"),), 1.0, made_for=3)))
    first = memo.decoded("s1", "k", stored, decode)
    assert memo.decoded("s1", "k", bytes(bytearray(stored)), decode) is first and len(decodes) == 1
    assert memo.decoded("s2", "k", stored, decode) is not first  # per session
    refused = orjson.dumps(with_refusal(orjson.loads(stored), "gpt-4o", 8000))
    assert memo.decoded("s1", "k", refused, decode).refused == {"gpt-4o": 8000} and len(decodes) == 3
    truthy = stored.replace(b'"made_for":3', b'"made_for":true')  # == as Python values, not the same JSON
    assert memo.decoded("s1", "k", truthy, decode).checkpoints[0].made_for is None and len(decodes) == 4
    assert memo.decoded("s1", "k", None, decode) == SessionIndex.decode(None)  # forgotten
    assert memo.decoded("s1", "k", stored, decode) is not first  # the entry was replaced meanwhile


def test_bytes_that_are_not_json_read_as_no_index_at_every_read() -> None:
    memo = IndexMemo(ByteLRU(1 << 20))
    for _ in range(2):
        with capture_logs() as logs:
            assert memo.decoded("s1", "k", b"{not json", SessionIndex.decode).checkpoints == []
        assert [e["event"] for e in logs] == ["store.corrupt_entry"]


def views(store: Store) -> SessionViews:
    return SessionViews(store, TokenCounter(), builtin_registry().kinds, ByteLRU(1 << 20))


async def follows_every_write(here: Store, there: Store) -> None:
    """A reader on ``here`` gets every write made through ``there`` (another process, or replica),
    at its next load, and decodes an index it read before only once."""
    reader = views(here)
    key = checkpoints_key(KEY)
    assert (await reader.load(KEY)).checkpoints == []
    one = Checkpoint(9, "0" * 32, (Block(1, 9, "first"),), 1.0)
    await there.update(key, lambda index: with_checkpoint(index, one))
    first = await reader.load(KEY)
    assert first.checkpoints == [one] and await reader.load(KEY) is first  # read, not decoded again
    two = Checkpoint(12, "1" * 32, (Block(1, 12, "second"),), 2.0)
    await there.update(key, lambda index: with_checkpoint(index, two))  # a compaction elsewhere
    assert [c.end for c in (await reader.load(KEY)).checkpoints] == [9, 12]
    await there.update(key, lambda index: with_refusal(index, "gpt-4o", 7000))  # a refusal elsewhere
    assert (await reader.load(KEY)).refused == {"gpt-4o": 7000}
    await there.delete(key)  # forget
    forgotten = await reader.load(KEY)
    assert not forgotten.checkpoints and not forgotten.refused
    await there.update(key, lambda index: with_checkpoint(index, one))  # the very bytes of before
    assert (await reader.load(KEY)).checkpoints == [one]


async def test_every_write_of_another_process_on_the_directory_is_read(tmp_path: Path) -> None:
    here, there = open_store("diskcache", tmp_path), open_store("diskcache", tmp_path)  # two processes' stores
    try:
        await follows_every_write(here, there)
    finally:
        await here.close()
        await there.close()


def held_bytes(root: object) -> int:
    """What CPython holds for ``root``, measured: ``sys.getsizeof`` of every object reachable
    through containers and dataclass fields, each counted once."""
    seen: set[int] = set()
    total = 0
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend([*item.keys(), *item.values()])
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif dataclasses.is_dataclass(item):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
    return total


def paged_index(checkpoints: int, pages: int, words: str = "word") -> bytes:
    """A ``paged`` session's stored index: ``checkpoints`` checkpoints, the newest archiving ``pages``."""
    value: JSONValue | None = None
    for n in range(1, checkpoints + 1):
        count = pages * n // checkpoints
        entries = [
            ContentsEntry(p, 2 * p, 2 * p + 2, f"{p}:{p:016x}", f"{words} summary {p}", (f"{words} {p}",) * 3, p)
            for p in range(1, count + 1)
        ]
        state = {"pages": count, **encode_entries(entries)}
        checkpoint = Checkpoint(2 * count + 2, f"{n:032x}", (Block(1, 2 * count + 2, "s"),), float(n), state=state)
        value = with_checkpoint(value, checkpoint)
    return orjson.dumps(value)


@pytest.mark.parametrize(
    "stored",
    [paged_index(8, 300), paged_index(8, 300, "wörd ☃"), orjson.dumps({"checkpoints": [], "refused": {"m": 9}})],
    ids=["paged", "paged-wide-characters", "refusals"],
)
def test_an_entry_is_accounted_as_at_least_what_it_holds(stored: bytes) -> None:
    cache: ByteLRU[Hashable, Any] = ByteLRU(1 << 30)
    IndexMemo(cache).decoded("s1", "k", stored, SessionIndex.decode)
    held = held_bytes(cache.get(("index", "s1")))
    assert held <= cache.nbytes - ENTRY_BYTES <= 1.2 * held


def test_a_paged_index_at_3000_messages_stays_in_the_default_share() -> None:
    stored = paged_index(8, 1500)  # ~1,500 pages archived: ~3,000 messages
    memo = IndexMemo(CachePool().lru("checkpoints"))
    decodes: list[JSONValue | None] = []

    def decode(value: JSONValue | None) -> SessionIndex:
        decodes.append(value)
        return SessionIndex.decode(value)

    first = memo.decoded("s1", "k", stored, decode)
    again = memo.decoded("s1", "k", bytes(bytearray(stored)), decode)
    assert len(decodes) == 1 and max(again.checkpoints, key=lambda c: c.end) is first.checkpoints[-1]


def test_only_the_newest_checkpoint_keeps_what_was_decoded_from_it() -> None:
    memo = IndexMemo(ByteLRU(1 << 24))
    stored = paged_index(3, 30)
    reads: list[int] = []

    def read(state: Mapping[str, Any]) -> int:
        reads.append(state["pages"])
        return int(state["pages"])

    for _ in range(2):
        index = memo.decoded("s1", "k", stored, SessionIndex.decode)
        assert [c.decoded(read) for c in index.checkpoints] == [10, 20, 30]
    assert reads == [10, 20, 30, 10, 20]  # the older two decoded again, the newest once
    assert memo.decoded("s1", "k", stored, SessionIndex.decode).checkpoints == index.checkpoints

"""Fencing tokens in a session's checkpoint index: the largest one written stays, and a compaction
(or a branch summary) whose lease was taken over (its token is smaller) is fenced out; one without
a lease never is."""

from __future__ import annotations

from pathlib import Path

import structlog

from ctxproxy.compaction.checkpoints import (
    BRANCHES,
    decode_index,
    fenced_out,
    save_fenced,
    stored_fence,
    with_branch,
    with_checkpoint,
)
from ctxproxy.session import SessionKey
from ctxproxy.store.disk import DiskStore
from ctxproxy.store.keys import checkpoints_key
from ctxproxy.strategies.base import Block, Checkpoint


def checkpoint(text: str, end: int = 5, at: float = 1.0) -> Checkpoint:
    return Checkpoint(end, f"{end:032x}", (Block(1, end, text),), at, "llm")


def test_the_largest_fence_written_stays() -> None:
    index = with_checkpoint(None, checkpoint("a"), 7)
    assert stored_fence(index) == 7
    index = with_checkpoint(index, checkpoint("b", end=9), 12)
    assert stored_fence(index) == 12
    index = with_checkpoint(index, checkpoint("c", end=11))  # without a lease: the fence stays
    assert stored_fence(index) == 12
    assert [c.blocks[0].text for c in decode_index(index)] == ["a", "b", "c"]


def test_a_smaller_fence_is_fenced_out_and_a_missing_one_never() -> None:
    index = with_checkpoint(None, checkpoint("newer"), 12)
    assert fenced_out(index, 11)
    assert not fenced_out(index, 12)
    assert not fenced_out(index, 13)
    assert not fenced_out(index, None)
    assert not fenced_out(None, 1)
    assert not fenced_out({"checkpoints": [], "fence": True}, 1)  # not a number: no fence recorded


def test_an_index_written_before_fences_takes_the_first_one() -> None:
    old = {"checkpoints": [checkpoint("old").to_json()], "refused": {"m": 4000}}
    assert stored_fence(old) is None and not fenced_out(old, 1)
    index = with_checkpoint(old, checkpoint("new", end=9), 3)
    assert index["refused"] == {"m": 4000} and stored_fence(index) == 3


def test_branch_summaries_are_fenced_apart_from_checkpoints() -> None:
    """The branch lease and the compaction lease are taken independently: each family records
    and checks its own fence, so a branch summary never fences a compaction out (nor the reverse)."""
    index = with_checkpoint(None, checkpoint("summary"), 20)
    index = with_branch(index, checkpoint("branch", end=3), 7)
    assert (stored_fence(index), stored_fence(index, BRANCHES)) == (20, 7)
    assert fenced_out(index, 6, BRANCHES) and not fenced_out(index, 7, BRANCHES)
    assert not fenced_out(index, 20) and fenced_out(index, 19)
    index = with_checkpoint(index, checkpoint("newer summary", end=9, at=2.0), 21)
    assert stored_fence(index, BRANCHES) == 7
    assert [c.blocks[0].text for c in decode_index(index, BRANCHES)] == ["branch"]


async def test_a_write_fenced_out_saves_nothing_and_says_so(tmp_path: Path) -> None:
    """``save_fenced`` on a real store: a holder whose lease was taken over (a smaller fence)
    leaves the index as the newer holder wrote it, and logs ``….fenced``."""
    store = DiskStore(tmp_path / "data")
    key = SessionKey("t", "s_fenced", "header")
    events = ("branch_summary.not_saved", "branch_summary.fenced")
    try:
        assert await save_fenced(store, key, checkpoint("newer", end=3, at=2.0), 9, family=BRANCHES, events=events)
        with structlog.testing.capture_logs() as logs:
            saved = await save_fenced(store, key, checkpoint("late", end=3), 8, family=BRANCHES, events=events)
        assert not saved
        index = await store.get(checkpoints_key(key))
        assert [c.blocks[0].text for c in decode_index(index, BRANCHES)] == ["newer"]
        (fenced,) = [line for line in logs if line["event"] == "branch_summary.fenced"]
        assert (fenced["fence"], fenced["newer_fence"]) == (8, 9)
    finally:
        await store.close()

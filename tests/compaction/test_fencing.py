"""Fencing tokens in a session's checkpoint index: the largest one written stays, and a compaction
whose lease was taken over (its token is smaller) is fenced out; one without a lease never is."""

from __future__ import annotations

from ctxproxy.compaction.checkpoints import decode_index, fenced_out, stored_fence, with_checkpoint
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

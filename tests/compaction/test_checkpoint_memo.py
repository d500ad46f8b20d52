"""``CheckpointMemo``: a session's longest checkpoint, read again from the Store, is the object
read before — with what a strategy decoded from it — only when it is equal to it in every field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ctxproxy.cache import ByteLRU
from ctxproxy.compaction.checkpoint_memo import CheckpointMemo
from ctxproxy.compaction.checkpoints import decode_index, with_checkpoint
from ctxproxy.compaction.runner import as_kept
from ctxproxy.strategies.base import Block, Checkpoint, Lineage


def checkpoint(end: int, state: Mapping[str, Any], at: float = 1.0) -> Checkpoint:
    return Checkpoint(end, f"{end:032x}", (Block(1, end, f"summary to {end}"),), at, "extractive", dict(state))


def test_the_longest_checkpoint_read_again_is_the_one_read_before() -> None:
    memo = CheckpointMemo(ByteLRU(1 << 20))
    stored = with_checkpoint(with_checkpoint(None, checkpoint(4, {"n": [1]})), checkpoint(9, {"n": [1, 2]}, 2.0))
    decodes: list[Mapping[str, Any]] = []

    def entries(state: Mapping[str, Any]) -> list[int]:
        decodes.append(state)
        return list(state["n"])

    first = memo.settled("s1", decode_index(stored))
    again = memo.settled("s1", decode_index(stored))  # the Store hands back new objects
    newest = max(again, key=lambda c: c.end)
    assert newest is max(first, key=lambda c: c.end)
    assert [c.end for c in again] == [4, 9] and again[0] is not first[0]  # only the longest is kept
    assert newest.decoded(entries) == [1, 2] and newest.decoded(entries) == [1, 2] and len(decodes) == 1
    assert memo.settled("s1", decode_index(stored))[1].decoded(entries) == [1, 2] and len(decodes) == 1
    assert memo.settled("s2", decode_index(stored))[1] is not newest  # another session's own


def test_a_checkpoint_that_differs_in_anything_is_a_new_one() -> None:
    memo = CheckpointMemo(ByteLRU(1 << 20))
    before = memo.settled("s1", [checkpoint(9, {"n": [1, 2]})])[0]
    edited = memo.settled("s1", [checkpoint(9, {"n": [1, 3]})])[0]  # same end, prefix and time
    assert edited is not before and edited.state == {"n": [1, 3]}
    assert memo.settled("s1", [checkpoint(9, {"n": [1, 3]})])[0] is edited
    assert memo.settled("s1", [checkpoint(9, {"n": [1, 3]}, at=5.0)])[0] is not edited
    assert memo.settled("s1", []) == []


def test_a_checkpoint_larger_than_the_share_is_not_kept() -> None:
    memo = CheckpointMemo(ByteLRU(1000))
    big = {"n": list(range(500))}
    first = memo.settled("s1", [checkpoint(9, big)])[0]
    assert memo.settled("s1", [checkpoint(9, big)])[0] is not first


def test_a_kept_checkpoint_keeps_what_was_decoded_from_its_state() -> None:
    """``as_kept`` links and stamps the executor's checkpoint; what its maker recorded as decoded
    (``known_as``: paged's archive index) goes with it, so the next request does not decode it."""
    made = checkpoint(9, {"n": [1, 2]})
    made.known_as(list, [7])  # what the maker had at hand
    kept = as_kept(made, checkpoint(4, {"n": [1]}), 21)
    assert kept == replace(made, made_for=21, base=Lineage(4, f"{4:032x}"))
    assert kept.decoded(list) == [7]
    assert as_kept(made, None, 3).decoded(list) == [7] and as_kept(made, None, 3).base is None

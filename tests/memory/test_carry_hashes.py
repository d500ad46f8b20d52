"""``ctxproxy.memory.carry``'s fast paths against the plain ones, on random conversations that go
on, are resent, edited, cut short, forked into another conversation of the same scope, with
compactions and deleted memories:

- the carried blocks' prefix hashes taken from a chain hashed on from the previous request's
  (which answers the lengths that one was asked for: ``tests/session/test_inherited_hashes.py``):
  what ``carry`` answers with it is what it answers with a chain hashed from the start;
- ``Checked.wants``: when it says no new block can be made, what the search found does not
  change what is carried (the caller skips the search then)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.memory.carry import Carried, Checked, _new_block, carry, check, made
from ctxproxy.memory.inject import HEADER, Memory, MemoryBlock, block_side, newest_user_index
from ctxproxy.session.digest import PrefixChain, message_digest

TOP_K, BUDGET = 3, 60

Messages = list[dict[str, Any]]


def count(text: str) -> int:
    return len(text.split())


def found(ns: list[int]) -> MemoryBlock:
    return MemoryBlock(HEADER, [Memory(f"fact {n} a b", "fact", float(n), f"id{n}") for n in ns], BUDGET)


def chained(messages: Messages, previous: PrefixChain | None, plain: bool) -> PrefixChain:
    """The request's chain as ``identify`` makes it (hashed on from the previous request's), or
    one without a hash state."""
    digests = tuple(message_digest(m) for m in messages)
    return PrefixChain.from_digests(digests) if plain else PrefixChain.hashed(digests, previous)


def grow(messages: Messages, words: list[int]) -> Messages:
    out = list(messages)
    for word in words:
        role = "assistant" if out and out[-1]["role"] == "user" else "user"
        out.append({"role": role, "content": f"m{word}"})
    return out


def reference(checked: Checked, messages: Messages, wanted: MemoryBlock | None) -> Carried:
    """What is carried, as ``carry`` decided before ``Checked.wants``: a new block is tried
    whenever the newest user message is new and something was found."""
    kept, asked = checked.kept, checked.asked
    if asked is None or asked == checked.previous.asked or any(b.at == asked for b in kept) or wanted is None:
        return Carried(kept, asked)
    block = _new_block(kept, asked, block_side(messages, asked.index), wanted, TOP_K, count)
    return Carried(kept if block is None else (*kept, block), asked)


_steps = st.tuples(
    st.sampled_from(["on", "on", "on", "same", "edit", "cut", "other", "plain"]),
    st.lists(st.integers(0, 4), min_size=1, max_size=4),  # new messages' words
    st.integers(0, 30),  # where an edit or a cut lands, where the compaction cut falls
    st.lists(st.integers(0, 9), max_size=5),  # what the search finds
    st.lists(st.integers(0, 9), max_size=2),  # documents deleted since
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_steps, min_size=1, max_size=14))
def test_carry_with_the_kept_chain_answers_as_hashing_the_whole_history(
    steps: list[tuple[str, list[int], int, list[int], list[int]]],
) -> None:
    conversations: dict[str, tuple[Messages, PrefixChain | None]] = {"a": ([], None), "b": ([], None)}
    current, carried = "a", Carried()
    for op, words, at, hits, deleted in steps:
        if op == "other":  # another conversation of the same scope: the pinned Carried is the first one's
            current = "b" if current == "a" else "a"
        messages, previous = conversations[current]
        if op == "edit" and messages:
            messages = list(messages)
            i = at % len(messages)
            messages[i] = {**messages[i], "content": f"edited {words[0]}"}
        elif op == "cut" and messages:
            messages = messages[: at % len(messages)]
        if op != "same":
            messages = grow(messages, words)
        chain = chained(messages, previous, op == "plain")
        conversations[current] = (messages, chain)
        cut = min(at, len(messages)) if at % 3 == 0 else 0
        newest = newest_user_index(messages, cut)
        gone = frozenset(f"id{n}" for n in deleted)
        wanted = found(hits) if hits else None
        fast = carry(carried, messages, chain, newest, cut, wanted, TOP_K, count, gone)
        whole = PrefixChain.from_digests(chain.digests)  # no predecessor: every prefix hashed from the start
        slow = carry(carried, messages, whole, newest, cut, wanted, TOP_K, count, gone)
        assert fast == slow
        assert [b.text for b in fast.placed] == [b.text for b in slow.placed]
        checked = check(carried, chain, newest, cut, gone)
        for other in (None, found([]), found(hits), found([9 - n for n in hits] + [7, 8])):
            assert made(checked, messages, other, TOP_K, count) == reference(checked, messages, other)
            if not checked.wants(BUDGET, TOP_K):
                assert reference(checked, messages, other) == fast
        carried = fast

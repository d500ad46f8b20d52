"""The prefix hashes a session's previous request found are taken by the next one only up to the
length it repeats whole (``ctxproxy.compaction.prefix_memo``): on any sequence of requests — a
conversation that goes on, an edited or regenerated message, a fork, another session's requests
in between — every prefix hash, and the checkpoint matched, is what hashing gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.cache import ByteLRU
from ctxproxy.compaction.checkpoints import longest_match
from ctxproxy.compaction.prefix_memo import PrefixMemo
from ctxproxy.session import PrefixChain
from ctxproxy.strategies.base import Block, Checkpoint

# Few distinct digests, so that an edit can give back a list seen before.
DIGESTS = st.sampled_from([bytes([i]) * 16 for i in range(3)])


@st.composite
def requests(draw: st.DrawFn) -> list[tuple[str, tuple[bytes, ...]]]:
    """Each session's digest lists, request by request: appended to, cut and appended to
    (an edit, a fork), or sent again as they were."""
    sent: list[tuple[str, tuple[bytes, ...]]] = []
    lists = {"a": (), "b": ()}
    for _ in range(draw(st.integers(1, 12))):
        session = draw(st.sampled_from(["a", "a", "a", "b"]))
        digests = lists[session]
        keep = draw(st.integers(0, len(digests))) if draw(st.integers(0, 3)) == 0 else len(digests)
        digests = digests[:keep] + tuple(draw(st.lists(DIGESTS, max_size=4)))
        lists[session] = digests
        sent.append((session, digests))
    return sent


@settings(max_examples=300, deadline=None)
@given(requests(), st.data())
def test_every_prefix_hash_and_match_is_what_hashing_gives(
    sent: list[tuple[str, tuple[bytes, ...]]], data: st.DataObject
) -> None:
    memo = PrefixMemo(ByteLRU(1 << 20))
    chains: dict[str, PrefixChain] = {}
    for session, digests in sent:
        chain = PrefixChain.hashed(digests, chains.get(session))  # as identifying a request does
        chains[session] = chain
        hashes = memo.hashes(session, chain)
        for k in range(len(chain) + 1):  # every length: the next request may repeat any of them
            assert hashes.hex(k) == chain.prefix_hash(k).hex()
        ends = data.draw(st.lists(st.integers(1, len(chain) + 1), max_size=3))
        made = [
            Checkpoint(end, data.draw(st.sampled_from(seen)).prefix_hash(end).hex(), (Block(0, end, "s"),), 1.0)
            for end in ends
            if (seen := [c for c in chains.values() if len(c) >= end])
        ]
        assert longest_match(made, chain, memo.hashes(session, chain).hex) == longest_match(made, chain)


def test_a_request_that_goes_on_hashes_only_lengths_it_did_not_repeat() -> None:
    memo = PrefixMemo(ByteLRU(1 << 20))
    first = PrefixChain.hashed(tuple(bytes([i]) * 16 for i in range(10)))
    memo.hashes("s", first).hex(8)
    went_on = PrefixChain.hashed(first.digests + (b"x" * 16,), first)
    hashes = memo.hashes("s", went_on)
    assert hashes.hex(8) == went_on.prefix_hash(8).hex() and hashes.known == {8: hashes.hex(8)}
    edited = PrefixChain.hashed(first.digests[:9] + (b"y" * 16,), went_on)  # does not repeat it whole
    assert memo.hashes("s", edited).known == {}

"""Prefix hashes a chain takes from the chain it goes on from (``PrefixChain.hashed``: the lengths
that one computed, and the hash state at its length), against the plain computation, on random
sequences of chains that go on, fork from an older one, are edited or cut short; and the memo's
bounds: a chain keeps only the lengths asked of it, and never keeps its predecessor alive."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import weakref

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.session import PrefixChain, message_digest
from ctxproxy.session.digest import DIGEST_SIZE, _made


def _digest(text: str) -> bytes:
    return message_digest({"role": "user", "content": text})


def _plain(digests: tuple[bytes, ...], k: int) -> bytes:
    return hashlib.sha256(b"".join(digests[:k])).digest()[:DIGEST_SIZE] if k else b""


# On a chain picked among those made (an index, taken modulo their number): go on with n more
# messages (told ``made_on`` or compared), edit a message, cut it short, or ask prefix hashes.
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 30), st.integers(0, 5), st.booleans()),
        st.tuples(st.just("edit"), st.integers(0, 30), st.integers(0, 60), st.booleans()),
        st.tuples(st.just("cut"), st.integers(0, 30), st.integers(0, 60), st.booleans()),
        st.tuples(st.just("regenerate"), st.integers(0, 30), st.integers(0, 3), st.booleans()),
        st.tuples(st.just("ask"), st.integers(0, 30), st.integers(0, 60), st.booleans()),
        st.tuples(st.just("asks"), st.integers(0, 30), st.integers(0, 60), st.booleans()),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(STEPS, st.lists(st.integers(0, 60), max_size=6))
def test_every_answer_is_the_plain_hash(steps: list[tuple[str, int, int, bool]], extra: list[int]) -> None:
    chains = [PrefixChain.hashed(tuple(_digest(f"m{i}") for i in range(3)))]
    made = 0
    for kind, pick, n, flag in steps:
        chain = chains[pick % len(chains)]
        digests = chain.digests
        if kind == "append":
            made += 1
            more = digests + tuple(_digest(f"n{made}.{i}") for i in range(n))
            chains.append(PrefixChain.hashed(more, chain, made_on=flag))
        elif kind == "edit" and digests:
            made += 1
            at = n % len(digests)
            edited = (*digests[:at], _digest(f"e{made}"), *digests[at + 1 :])
            chains.append(PrefixChain.hashed(edited, chain))
        elif kind == "regenerate" and digests:
            made += 1  # a new last message, and maybe more after it: hashed on from the state before it
            regenerated = (*digests[:-1], *(_digest(f"r{made}.{i}") for i in range(n + 1)))
            chains.append(PrefixChain.hashed(regenerated, chain, forked=flag))  # told, or compared
        elif kind == "cut":
            chains.append(PrefixChain.hashed(digests[: n % (len(digests) + 1)], chain))
        elif kind == "ask" and n <= len(chain):
            assert chain.prefix_hash(n) == _plain(digests, n)
        elif kind == "asks":
            lengths = [n, *extra] if flag else extra
            got = chain.prefix_hashes(lengths)
            assert got == {k: _plain(digests, k) for k in set(lengths) if k <= len(chain)}
    for chain in chains:
        assert chain.hashes == tuple(_plain(chain.digests, k) for k in range(len(chain) + 1))
        assert chain.head == _plain(chain.digests, len(chain))


def test_a_chain_that_goes_on_takes_its_predecessors_hashes() -> None:
    old = PrefixChain.hashed(tuple(_digest(f"m{i}") for i in range(50)))
    asked = old.prefix_hashes([10, 40, 50])
    new = PrefixChain.hashed((*old.digests, _digest("next")), old, made_on=True)
    assert new._known(40) == asked[40] and new._known(50) == asked[50]
    assert new._known(20) is None  # never asked of the old chain: hashed afresh when asked
    assert new.prefix_hash(20) == _plain(new.digests, 20)
    assert new.prefix_hash(51) == _plain(new.digests, 51)
    edited = PrefixChain.hashed((_digest("other"), *old.digests[1:]), old)
    assert edited._known(40) is None and edited.prefix_hash(40) == _plain(edited.digests, 40)


def test_a_new_last_message_hashes_on_from_the_state_its_predecessor_went_on_from() -> None:
    old = PrefixChain.hashed(tuple(_digest(f"m{i}") for i in range(50)))
    went_on = PrefixChain.hashed((*old.digests, _digest("a"), _digest("q")), old, made_on=True)
    went_on.prefix_hashes([10, 49, 51, 52])  # the lengths a request asks of its chain
    for forked in (True, False):  # told, or compared
        new = PrefixChain.hashed((*went_on.digests[:-1], _digest("regenerated")), went_on, forked=forked)
        assert new._resume is not None and new._resume[0] == 50 and new._resume[1] is old.whole
        assert new.extends is None  # it does not repeat ``went_on`` whole
        assert new._known(49) == _plain(old.digests, 49) and new._known(51) is None
        assert new.hashes == tuple(_plain(new.digests, k) for k in range(len(new) + 1))
        # Regenerated again: on from the same state.
        again = PrefixChain.hashed((*new.digests[:-1], _digest("again")), new, forked=forked)
        assert again._resume == new._resume and again.head == _plain(again.digests, 52)
    # A chain hashed from scratch keeps the state before its last digest: a new last message
    # after it hashes on from there (as after the same digests again, from their predecessor's).
    assert old._resume is not None and old._resume[0] == 49 and old._inherited is None
    forked = PrefixChain.hashed((*old.digests[:-1], _digest("regenerated")), old, forked=True)
    assert forked._resume is old._resume and forked.head == _plain(forked.digests, 50)
    resent = PrefixChain.hashed(went_on.digests, went_on, made_on=True)
    new = PrefixChain.hashed((*resent.digests[:-1], _digest("regenerated")), resent, forked=True)
    assert new._resume is not None and new._resume[0] == 51 and new._inherited is None
    assert new.head == _plain(new.digests, 52)
    edited = PrefixChain.hashed((_digest("x"), *went_on.digests[1:-1], _digest("y")), went_on)
    assert edited._inherited is None and edited._resume is not None and edited._resume[0] == 51
    assert edited._known(40) is None and edited.head == _plain(edited.digests, 52)


def test_a_chain_made_at_once_is_the_dataclass_made() -> None:
    state = hashlib.sha256(b"x")
    made = _made(PrefixChain, (b"d" * 16,), state, b"d" * 16, "e", {1: b"h"}, (1, state))
    plain = PrefixChain((b"d" * 16,), state, extends="e", _joined=b"d" * 16, _inherited={1: b"h"}, _resume=(1, state))
    assert set(vars(made)) == {field.name for field in dataclasses.fields(PrefixChain)}
    assert {k: v for k, v in vars(made).items() if k != "token"} == {
        k: v for k, v in vars(plain).items() if k != "token"
    }
    assert made == plain and hash(made) == hash(plain) and made.token is not plain.token


def test_the_memo_holds_the_lengths_asked_and_frees_old_chains() -> None:
    chain = PrefixChain.hashed(tuple(_digest(f"m{i}") for i in range(30)))
    first = weakref.ref(chain)
    for step in range(200):
        chain.prefix_hashes([5, 20, len(chain)])
        chain.prefix_hash(len(chain) - 1)
        chain = PrefixChain.hashed((*chain.digests, _digest(f"s{step}")), chain, made_on=True)
        # The lengths asked of this chain and of the one before it, never the whole history's.
        assert len(chain._asked) <= 4 and chain._inherited is not None and len(chain._inherited) <= 4
    gc.collect()
    assert first() is None
    assert chain.prefix_hash(20) == _plain(chain.digests, 20)

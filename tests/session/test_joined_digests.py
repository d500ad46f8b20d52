"""The digests a chain keeps joined (``PrefixChain.joined``), made from the previous request's at
each request that goes on from it, against the plain join, and what is read from them — prefix
hashes, prompt prints and how much two prints share — against the computations that join or
slice afresh, on random sequences of requests that go on, are edited, cut short or fork."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.pipeline.cache_prefix import Sent
from ctxproxy.session import PrefixChain, message_digest
from ctxproxy.session.digest import DIGEST_SIZE
from ctxproxy.session.known import Known, repeated
from ctxproxy.session.prompt_prints import PromptPrint

# One request after another: append n messages, edit the message at a position, cut to a length,
# or start afresh (another conversation: no previous chain).
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 4)),
        st.tuples(st.just("edit"), st.integers(0, 40)),
        st.tuples(st.just("cut"), st.integers(0, 40)),
        st.tuples(st.just("fresh"), st.integers(0, 6)),
    ),
    min_size=1,
    max_size=12,
)


def _digest(text: str) -> bytes:
    return message_digest({"role": "user", "content": text})


def _requests(steps: list[tuple[str, int]]) -> list[tuple[tuple[bytes, ...], bool]]:
    """Each request's digests, and whether it is hashed on from the previous chain."""
    out: list[tuple[tuple[bytes, ...], bool]] = []
    digests: tuple[bytes, ...] = ()
    made = 0
    for kind, n in steps:
        made += 1
        if kind == "append":
            digests = digests + tuple(_digest(f"m{made}.{i}") for i in range(n))
        elif kind == "edit" and digests:
            at = n % len(digests)
            digests = (*digests[:at], _digest(f"edited {made}"), *digests[at + 1 :])
        elif kind == "cut":
            digests = digests[: n % (len(digests) + 1)]
        elif kind == "fresh":
            digests = tuple(_digest(f"f{made}.{i}") for i in range(n))
        out.append((digests, kind != "fresh"))
    return out


def _plain_shared(mine: bytes, theirs: bytes) -> int:
    """How many leading digests two joined prints share, by slices (as before the views)."""
    n = min(len(mine), len(theirs)) // DIGEST_SIZE
    return next((k for k in range(n) if mine[: (k + 1) * DIGEST_SIZE] != theirs[: (k + 1) * DIGEST_SIZE]), n)


@settings(max_examples=200, deadline=None)
@given(STEPS, st.lists(st.integers(-1, 45), max_size=6))
def test_a_chain_hashed_on_keeps_the_plain_join_and_hashes(steps: list[tuple[str, int]], lengths: list[int]) -> None:
    previous: PrefixChain | None = None
    for digests, goes_on in _requests(steps):
        chain = PrefixChain.hashed(digests, previous if goes_on else None)
        plain = PrefixChain(digests)  # nothing kept: every hash joins its digests afresh
        if goes_on and previous is not None and digests[: len(previous.digests)] == previous.digests:
            made = PrefixChain.hashed(digests, previous, made_on=True)  # as identify hashes a request that went on
            assert (made.joined, made.head, made.extends) == (chain.joined, chain.head, chain.extends)
        assert chain.joined == b"".join(digests) == plain.joined
        whole = hashlib.sha256(b"".join(digests)).digest()[:DIGEST_SIZE] if digests else b""
        assert chain.head == plain.head == whole
        for k in range(len(digests) + 1):
            assert chain.prefix_hash(k) == plain.prefix_hash(k)
        assert chain.prefix_hashes(lengths) == {
            k: plain.prefix_hash(k) for k in sorted(set(lengths)) if 0 <= k <= len(digests)
        }
        previous = chain


@settings(max_examples=200, deadline=None)
@given(STEPS)
def test_prints_made_from_the_kept_join_share_what_plain_prints_share(steps: list[tuple[str, int]]) -> None:
    previous: PrefixChain | None = None
    before: PromptPrint | None = None
    for digests, goes_on in _requests(steps):
        chain = PrefixChain.hashed(digests, previous if goes_on else None)
        sent = Sent([], digests, [1] * len(digests), [], 0, len(digests), chain.joined)
        plain = PromptPrint.of(b"", digests)
        assert sent.print == plain
        if before is not None:
            assert sent.print.shared(before) == plain.shared(before) == _plain_shared(plain.messages, before.messages)
            assert before.shared(sent.print) == _plain_shared(before.messages, plain.messages)
        previous, before = chain, plain


def test_a_chain_of_digests_of_other_sizes_hashes_them_as_joined() -> None:
    """A chain whose digests are not ``DIGEST_SIZE`` bytes each (made by hand) is hashed by
    joining them, not by offsets into its join."""
    chain = PrefixChain((b"ab", b"c", b"defg"))
    assert chain.joined == b"abcdefg"
    assert chain.prefix_hash(2) == hashlib.sha256(b"abc").digest()[:DIGEST_SIZE]
    assert chain.prefix_hashes([1, 3]) == {1: chain.prefix_hash(1), 3: chain.prefix_hash(3)}


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 8), st.integers(0, 10), st.sampled_from(["same", "equal", "edited", "tuple"]))
def test_repeated_is_the_plain_prefix_comparison(known_n: int, asked_n: int, how: str) -> None:
    known_messages = [{"role": "user", "content": f"m{i}"} for i in range(known_n)]
    asked: list[dict[str, str]] | tuple[dict[str, str], ...] = [
        (known_messages[i] if how == "same" else {"role": "user", "content": f"m{i}"})
        if i < known_n
        else {"role": "user", "content": f"new {i}"}
        for i in range(asked_n)
    ]
    if how == "edited" and asked:
        asked[len(asked) // 2] = {"role": "user", "content": "edited"}
    if how == "tuple":
        asked = tuple(asked)
    known = Known(known_messages, (), (), "enc", ())
    plain = next(
        (
            (known, n)
            for n in (known_n, known_n - 1)
            if 0 < n <= len(asked) and asked[:n] == known_messages[:n]  # slices, as before
        ),
        None,
    )
    assert repeated(known, asked) == plain

"""Fork detection (``ctxproxy.session.fork``), pure: from the previous request this process saw,
or from the stored checkpoint chain; never across owners, never for strangers who only share an
opening."""

from __future__ import annotations

from typing import Any

from ctxproxy.session import PrefixChain
from ctxproxy.session.fork import Fork, Mark, detect_fork, owner_of, required_shared, shared_length
from ctxproxy.session.known import Known, message_sizes
from ctxproxy.session.lineage import Lineage

Messages = list[dict[str, Any]]


def talk(topic: str, turns: int) -> Messages:
    messages: Messages = [{"role": "system", "content": "be brief"}]
    for n in range(1, turns + 1):
        messages += [{"role": "user", "content": f"{topic} {n}?"}, {"role": "assistant", "content": f"{topic} {n}."}]
    return messages


def seen(messages: Messages, owner: str | None = None) -> Known:
    chain = PrefixChain.of(messages)
    tokens = tuple(10 * (i + 1) for i in range(len(messages)))
    return Known(messages, chain.digests, tokens, "enc", message_sizes(messages, None, 0), owner)


def mark(messages: Messages, end: int, at: float, base: Lineage | None = None) -> Mark:
    return Mark(end, PrefixChain.of(messages).prefix_hash(end).hex(), at, base)


def detect(request: Messages, previous: Known | None = None, marks: list[Mark] | None = None, **kw: Any) -> Fork | None:
    return detect_fork(
        PrefixChain.of(request), previous, marks or [], shared_at_least=kw.get("floor", 2), owner=kw.get("owner")
    )


def test_carrying_on_or_repeating_the_previous_request_is_no_fork() -> None:
    old = talk("lisbon", 5)
    assert detect([*old, {"role": "user", "content": "more"}], seen(old)) is None
    assert detect(old, seen(old)) is None


def test_an_edit_forks_where_the_two_stop_agreeing_and_the_rest_of_the_old_branch_is_abandoned() -> None:
    old = talk("lisbon", 6)
    new = [*old[:5], {"role": "user", "content": "porto 3?"}]
    fork = detect(new, seen(old))
    assert fork is not None and fork.stored is None
    assert fork.point == 5
    assert list(fork.messages) == old[5:] and fork.tokens == tuple(10 * (i + 1) for i in range(5, len(old)))
    assert fork.tip == Lineage.of(PrefixChain.of(old), len(old))


def test_a_shorter_resend_forks_with_all_it_shares() -> None:
    old = talk("lisbon", 6)
    fork = detect(old[:6], seen(old))
    assert fork is not None and fork.point == 6 and list(fork.messages) == old[6:]


def test_too_little_shared_another_owner_or_another_conversation_is_no_fork() -> None:
    old = talk("lisbon", 6)
    new = [*old[:3], {"role": "user", "content": "porto 2?"}]
    assert detect(new, seen(old), floor=4) is None  # shares 3, must share 4
    assert detect(new, seen(old, owner_of("alice", None)), owner=owner_of("bob", None)) is None
    assert detect(new, seen(old, owner_of("alice", None)), owner=owner_of("alice", None)) is not None
    assert detect(talk("porto", 3), seen(old)) is None  # nothing but the system prompt in common


def test_owners_and_the_shared_floor() -> None:
    assert owner_of(None, None) is None and owner_of("", None) is None
    assert owner_of("alice", None) != owner_of(None, "alice") != owner_of("alice", "team")
    assert "alice" not in (owner_of("alice", None) or "")
    messages = talk("lisbon", 3)
    assert required_shared(messages, anonymous=False) == 2  # through the first user message
    assert required_shared(messages, anonymous=True) == 4  # through the second
    assert required_shared(messages[:2], anonymous=True) is None


def test_from_the_stored_chain_a_fork_behind_the_newest_checkpoint_shares_its_base() -> None:
    old = talk("lisbon", 10)
    base = mark(old, 5, 1.0)
    newest = mark(old, 15, 2.0, base.lineage)
    new = [*old[:9], {"role": "user", "content": "porto 5?"}]
    fork = detect(new, None, [base, newest])
    assert fork is not None and fork.point == 5 and fork.stored == newest and fork.messages == ()
    assert fork.tip == newest.lineage


def test_from_the_stored_chain_only_what_proves_the_branches_related_counts() -> None:
    old = talk("lisbon", 10)
    other = talk("porto", 10)
    unrelated = mark(other, 5, 1.0)  # extended by the request, but not on the newest one's chain
    newest = mark(old, 15, 2.0)  # made over nothing still known
    request = [*other[:9], {"role": "user", "content": "porto 5 again?"}]
    assert detect(request, None, [unrelated, newest]) is None
    # The request extends the newest checkpoint: the fork lies in raw messages nobody stored.
    assert detect([*old[:17], {"role": "user", "content": "x"}], None, [mark(old, 5, 1.0), newest]) is None
    # A request naming a user or scope forks only from a request this process saw.
    base = mark(old, 5, 1.0)
    linked = mark(old, 15, 2.0, base.lineage)
    new = [*old[:9], {"role": "user", "content": "porto 5?"}]
    assert detect(new, None, [base, linked]) is not None
    assert detect(new, None, [base, linked], owner=owner_of("alice", None)) is None


def test_shared_length() -> None:
    assert shared_length([b"a", b"b", b"c"], [b"a", b"b", b"x", b"y"]) == 2
    assert shared_length([], [b"a"]) == 0

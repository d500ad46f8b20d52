"""Fork detection (``ctxproxy.session.fork``), pure, on real prefix chains: from the previous
request this process saw, or from the stored checkpoint chain; never across owners, never for
strangers who only share an opening. One detection for the branch summaries and ``before_fork``.

Note 003, §4 Branch Summary: "当用户跳到 session 树的另一个分支时，旧分支的工作上下文会丢失" — when
the user jumps to another branch of the session tree, the old branch's context is lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxproxy.session import PrefixChain
from ctxproxy.session.fork import Fork, detect_fork, lineage_of, owner_of, required_shared, shared_length
from ctxproxy.session.known import Known, message_sizes
from ctxproxy.session.lineage import Lineage

Messages = list[dict[str, Any]]


@dataclass(frozen=True)
class Point:
    """A checkpoint as fork detection reads it (``session.fork.ChainPoint``)."""

    end: int
    prefix_hash: str
    created_at: float
    base: Lineage | None = None


def talk(topic: str, turns: int) -> Messages:
    messages: Messages = [{"role": "system", "content": "be brief"}]
    for n in range(1, turns + 1):
        messages += [{"role": "user", "content": f"{topic} {n}?"}, {"role": "assistant", "content": f"{topic} {n}."}]
    return messages


def seen(messages: Messages, owner: str | None = None) -> Known:
    chain = PrefixChain.of(messages)
    tokens = tuple(10 * (i + 1) for i in range(len(messages)))
    return Known(messages, chain.digests, tokens, "enc", message_sizes(messages), owner)


def point(messages: Messages, end: int, at: float, base: Point | None = None) -> Point:
    return Point(end, PrefixChain.of(messages).prefix_hash(end).hex(), at, lineage_of(base) if base else None)


def detect(
    request: Messages, previous: Known | None = None, points: list[Point] | None = None, **kw: Any
) -> Fork[Point] | None:
    return detect_fork(
        PrefixChain.of(request), previous, points or [], shared_at_least=kw.get("floor", 2), owner=kw.get("owner")
    )


def test_carrying_on_or_repeating_the_previous_request_is_no_fork() -> None:
    old = talk("lisbon", 5)
    assert detect([*old, {"role": "user", "content": "more"}], seen(old)) is None
    assert detect(old, seen(old)) is None


def test_an_edit_forks_where_the_two_stop_agreeing_and_the_rest_of_the_old_branch_is_abandoned() -> None:
    old = talk("lisbon", 6)
    new = [*old[:5], {"role": "user", "content": "porto 3?"}]
    fork = detect(new, seen(old))
    assert fork is not None and fork.seen and fork.left is None and fork.kept is None
    assert fork.point == 5
    assert list(fork.messages) == old[5:] and fork.tokens == tuple(10 * (i + 1) for i in range(5, len(old)))
    assert fork.tip == Lineage.of(PrefixChain.of(old), len(old))


def test_a_shorter_resend_forks_with_all_it_shares() -> None:
    old = talk("lisbon", 6)
    fork = detect(old[:6], seen(old))
    assert fork is not None and fork.point == 6 and list(fork.messages) == old[6:]


def test_a_fork_names_the_checkpoint_it_left_and_the_one_it_kept() -> None:
    """The branch left was compacted past the edit (``left``); the request still begins with an
    older checkpoint (``kept``)."""
    old = talk("lisbon", 6)  # 13 messages
    early = point(old, 4, 1.0)
    tip = point(old, 10, 2.0, early)
    edited = [*old[:6], {"role": "user", "content": "lisbon 3, said differently?"}]

    fork = detect(edited, seen(old), [early, tip])

    assert fork is not None and fork.point == 6 and (fork.left, fork.kept) == (tip, early)
    # A shorter history that repeats the old messages forks too, and keeps nothing shorter.
    shorter = detect(old[:3], seen(old), [tip], floor=2)
    assert shorter is not None and (shorter.left, shorter.kept) == (tip, None)
    # An edit after the newest checkpoint's end leaves no checkpoint.
    late = detect([*old[:11], {"role": "user", "content": "again?"}], seen(old), [early, tip])
    assert late is not None and (late.left, late.kept) == (None, tip)


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


def test_no_checkpoint_no_fork_and_going_on_from_the_tip_is_none() -> None:
    old = talk("lisbon", 8)
    assert detect(old) is None
    early = point(old, 4, 1.0)
    points = [early, point(old, 10, 2.0, early)]
    assert detect([*old, {"role": "user", "content": "more"}], None, points) is None
    assert detect(old[:10], None, points) is None  # resent up to the tip's end: nothing covered left


def test_from_the_stored_chain_a_fork_behind_the_newest_checkpoint_shares_its_base() -> None:
    old = talk("lisbon", 10)
    base = point(old, 5, 1.0)
    newest = point(old, 15, 2.0, base)
    new = [*old[:9], {"role": "user", "content": "porto 5?"}]
    fork = detect(new, None, [base, newest])
    assert fork is not None and not fork.seen and fork.point == 5 and fork.messages == ()
    assert (fork.left, fork.kept) == (newest, base) and fork.tip == lineage_of(newest)


def test_the_tip_is_the_newest_checkpoint_not_the_longest() -> None:
    """Back on the older branch (longer, older checkpoint): the newer, shorter branch is the one left."""
    old = talk("lisbon", 8)
    other = [*old[:4], {"role": "user", "content": "porto instead?"}, {"role": "assistant", "content": "porto."}]
    shared = point(old, 4, 0.5)
    long_old, newer_other = point(old, 14, 1.0, shared), point(other, 6, 2.0, shared)

    fork = detect(old, None, [shared, long_old, newer_other])

    assert fork is not None and fork.point == 4 and (fork.left, fork.kept) == (newer_other, long_old)
    assert detect([*other, {"role": "user", "content": "go on"}], None, [shared, long_old, newer_other]) is None


def test_from_the_stored_chain_only_what_proves_the_branches_related_counts() -> None:
    old = talk("lisbon", 10)
    other = talk("porto", 10)
    unrelated = point(other, 5, 1.0)  # extended by the request, but not on the newest one's chain
    newest = point(old, 15, 2.0)  # made over nothing still known
    request = [*other[:9], {"role": "user", "content": "porto 5 again?"}]
    assert detect(request, None, [unrelated, newest]) is None
    # The request extends the newest checkpoint: the fork lies in raw messages nobody stored.
    assert detect([*old[:17], {"role": "user", "content": "x"}], None, [point(old, 5, 1.0), newest]) is None
    # A request naming a user or scope forks only from a request this process saw.
    base = point(old, 5, 1.0)
    linked = point(old, 15, 2.0, base)
    new = [*old[:9], {"role": "user", "content": "porto 5?"}]
    assert detect(new, None, [base, linked]) is not None
    assert detect(new, None, [base, linked], owner=owner_of("alice", None)) is None


def test_shared_length() -> None:
    assert shared_length([b"a", b"b", b"c"], [b"a", b"b", b"x", b"y"]) == 2
    assert shared_length([], [b"a"]) == 0

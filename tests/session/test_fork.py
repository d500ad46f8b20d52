"""Fork detection over a session's checkpoint chain (``ctxproxy.session.fork``), on real prefix chains.

Note 003, §4 Branch Summary: "当用户跳到 session 树的另一个分支时，旧分支的工作上下文会丢失" — when
the user jumps to another branch of the session tree, the old branch's context is lost. ctxproxy
sees the tree only through the checkpoints: a request that no longer begins with what the newest
one covers has left its branch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxproxy.session import PrefixChain
from ctxproxy.session.fork import find_fork


@dataclass(frozen=True)
class Point:
    end: int
    prefix_hash: str
    created_at: float


def talk(n: int, tag: str = "") -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}{tag}"} for i in range(n)]


def point(messages: list[dict[str, Any]], end: int, at: float) -> Point:
    return Point(end, PrefixChain.of(messages).prefix_hash(end).hex(), at)


def test_no_checkpoint_no_fork() -> None:
    assert find_fork([], PrefixChain.of(talk(6))) is None


def test_a_conversation_going_on_from_the_tip_has_not_forked() -> None:
    old = talk(12)
    points = [point(old, 4, 1.0), point(old, 10, 2.0)]
    assert find_fork(points, PrefixChain.of(talk(16))) is None
    assert find_fork(points, PrefixChain.of(old[:10])) is None  # resent up to the tip's end: nothing covered left


def test_an_edit_before_the_tip_forks_and_keeps_the_checkpoint_before_the_edit() -> None:
    old = talk(12)
    early, tip = point(old, 4, 1.0), point(old, 10, 2.0)
    edited = [*old[:6], {"role": "user", "content": "message 6, said differently"}, *old[7:]]

    fork = find_fork([early, tip], PrefixChain.of(edited))

    assert fork is not None and (fork.abandoned, fork.kept) == (tip, early)


def test_a_shorter_history_forks_even_when_it_repeats_the_old_messages() -> None:
    old = talk(12)
    tip = point(old, 10, 2.0)
    fork = find_fork([tip], PrefixChain.of(old[:7]))
    assert fork is not None and (fork.abandoned, fork.kept) == (tip, None)


def test_the_tip_is_the_newest_checkpoint_not_the_longest() -> None:
    """Back on the older branch (longer, older checkpoint): the newer, shorter branch is the one left."""
    old, other = talk(16), talk(8, " (other branch)")
    long_old, newer_other = point(old, 14, 1.0), point(other, 6, 2.0)

    fork = find_fork([long_old, newer_other], PrefixChain.of(old))

    assert fork is not None and (fork.abandoned, fork.kept) == (newer_other, long_old)
    assert find_fork([long_old, newer_other], PrefixChain.of(talk(10, " (other branch)"))) is None

"""Fork detection over a session's checkpoint chain. Pure.

Each checkpoint of a session says "the first ``end`` messages hash to ``prefix_hash``" (a prefix
chain hash, ``ctxproxy.session.digest``). The newest of them (by ``created_at``) is how far the
conversation had got: its *tip*. A request whose messages still begin with the tip's ``end``
messages goes on from it. One that does not has *forked* (note 003's branch): the client edited
a message the tip covers, or resent a shorter history, and the tip's branch was abandoned at
some message before the tip's ``end``.

``find_fork`` tells that from the data every request loads anyway (the session's checkpoints
and the request's own chain), with what the chain says of where the branches part: ``kept``,
the longest checkpoint the request still begins with (the two branches share at least its
``end`` messages; without one, the fork may be anywhere after the leading messages). A fork back
to an older branch is a fork too: the tip's branch is the one left.

Checkpoints are not a tree of every message: a fork after the tip's ``end`` (the newest, raw
messages edited) is not seen here, and a session key shared by two different conversations
(the same first user message, no ``X-Ctx-Session``) looks like one that keeps forking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ctxproxy.session.digest import PrefixChain


class ChainPoint(Protocol):
    """What fork detection reads of a checkpoint (``ctxproxy.strategies.base.Checkpoint``)."""

    @property
    def end(self) -> int: ...

    @property
    def prefix_hash(self) -> str: ...

    @property
    def created_at(self) -> float: ...


P = TypeVar("P", bound=ChainPoint)


@dataclass(frozen=True)
class Fork(Generic[P]):
    """``abandoned``: the tip the request no longer goes on from; ``kept``: the longest checkpoint
    the request still begins with, if any (older than the tip)."""

    abandoned: P
    kept: P | None


def find_fork(points: Sequence[P], chain: PrefixChain) -> Fork[P] | None:
    """The fork ``chain`` makes from the session's checkpoint chain ``points``, or None when it
    goes on from the tip (or the session has no checkpoint)."""
    if not points:
        return None
    hashes = chain.prefix_hashes(p.end for p in points)  # only ends within the chain

    def begun(point: P) -> bool:
        found = hashes.get(point.end)
        return found is not None and found.hex() == point.prefix_hash

    tip = max(points, key=lambda p: (p.created_at, p.end))
    if begun(tip):
        return None
    kept = [p for p in points if p is not tip and begun(p)]
    return Fork(tip, max(kept, key=lambda p: p.end) if kept else None)

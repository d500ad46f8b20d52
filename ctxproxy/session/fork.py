"""Fork detection: did this request leave the branch its session was on, where, and what did that
branch hold? Pure. One detection serves the branch summaries (``ctxproxy.strategies.branch``)
and the plugins' ``before_fork`` hook (``ctxproxy.compaction.hooks.ForkWatch``).

Clients are stateless, so a fork is seen only as a request that does not carry on the session's
previous one: the client edited an earlier message, or resent a shorter history and went on
differently (note 003's branch switch; a switch back to an older branch is a fork too: the
branch left is the one the session was on). ``detect_fork`` tells from what is known of the
session:

* **The previous request, as this process saw it** (``session.known``: its messages, digests and
  token counts). The fork point is exact: the number of leading messages the two share. The
  request forks when it does not repeat all of the previous one; the abandoned branch is the
  previous request's messages from the fork point on, verbatim.
* **Else the stored checkpoint chain** (another replica, or a restart, served the previous
  request; each checkpoint says "the first ``end`` messages hash to ``prefix_hash``", when it was
  made and the checkpoint it was made over, its ``base``). The request forks when the session's
  newest checkpoint is one it does not begin with: the session was last compacted on another
  branch. The two branches provably share the longest checkpoint of that one's chain (it, the
  one it was made over, and so on, as far as they are still stored) that the request begins
  with; without one, nothing proves the request is the same conversation and it is no fork. The
  fork point is known only to lie at or after that shared checkpoint's end; the abandoned branch
  is the newest checkpoint (what it holds from the fork point on is its block kinds' business).
  A fork in the raw, never-stored part of a branch is not visible this way: nothing of it was
  stored.

Either way the fork also names, of the session's checkpoints, the newest one the abandoned
branch holds and the request no longer begins with (``left``: what the client walked away from,
if the abandoned branch had been compacted past the fork point) and the longest one the request
still begins with (``kept``).

The two branches must share at least ``shared_at_least`` leading messages (``required_shared``):
through the first user message, the one that names the conversation; and for a request without
an identity, through the second one. And they must be one owner's (``owner_of``: the user and
scope a request names): two users, or two strangers, who open alike share a session key
(``session.identity``), and one's conversation must never come back as the other's "earlier
branch". A previous request of another owner is no fork; stored checkpoints do not say whose
they were, so a request that names a user or scope forks only from a request this process saw.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ctxproxy.session.digest import PrefixChain
from ctxproxy.session.known import Known
from ctxproxy.session.lineage import Lineage
from ctxproxy.vocabulary import ROLE_USER

__all__ = ["ChainPoint", "Fork", "detect_fork", "lineage_of", "owner_of", "required_shared", "shared_length"]


class ChainPoint(Protocol):
    """What fork detection reads of a checkpoint (``ctxproxy.strategies.base.Checkpoint``): its
    first ``end`` messages hash to ``prefix_hash`` (hex); made at ``created_at`` (unix seconds)
    over the checkpoint ``base``, if any."""

    @property
    def end(self) -> int: ...

    @property
    def prefix_hash(self) -> str: ...

    @property
    def created_at(self) -> float: ...

    @property
    def base(self) -> Lineage | None: ...


P = TypeVar("P", bound=ChainPoint)


@dataclass(frozen=True)
class Fork(Generic[P]):
    """The request left a branch. ``point``: the leading messages both branches share (exact
    when ``seen``, else a lower bound). ``tip``: the abandoned branch, as a request on it would
    begin (its last request, or its newest checkpoint). ``messages`` and ``tokens``: that
    branch's messages from ``point`` on and their token counts, when this process saw them
    (``seen``); else empty. ``left`` and ``kept``: the module docstring's (for a fork not
    ``seen``, ``left`` is the abandoned branch's newest checkpoint, always there)."""

    point: int
    tip: Lineage
    messages: tuple[Mapping[str, Any], ...] = ()
    tokens: tuple[int, ...] = ()
    left: P | None = None
    kept: P | None = None
    seen: bool = True


def lineage_of(point: ChainPoint) -> Lineage:
    """The messages a checkpoint covers, as a lineage."""
    return Lineage(point.end, point.prefix_hash)


def shared_length(a: Sequence[bytes], b: Sequence[bytes]) -> int:
    """How many leading digests ``a`` and ``b`` have in common."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def owner_of(user: str | None, scope: str | None) -> str | None:
    """Whose a conversation is, as a hash (never the names): None when a request names no user
    and no scope."""
    if not user and not scope:
        return None
    return hashlib.blake2b(f"{user or ''}\0{scope or ''}".encode(), digest_size=12).hexdigest()


def required_shared(messages: Sequence[Mapping[str, Any]], anonymous: bool) -> int | None:
    """The fewest leading messages a fork must share with the abandoned branch (module
    docstring): through the first user message, or the second for an anonymous request; None
    when the request has not that many user messages (it cannot fork)."""
    wanted = 2 if anonymous else 1
    seen = 0
    for i, message in enumerate(messages):
        if message.get("role") == ROLE_USER:
            seen += 1
            if seen == wanted:
                return i + 1
    return None


def detect_fork(
    chain: PrefixChain, previous: Known | None, points: Sequence[P], *, shared_at_least: int, owner: str | None
) -> Fork[P] | None:
    """The fork ``chain`` (the request's prefix chain) makes from the session's branch, or None
    (module docstring). ``previous``: the session's previous request as this process saw it;
    ``points``: the session's stored checkpoints; ``owner``: the request's ``owner_of``."""
    if previous is not None:
        return _from_previous(chain, previous, points, shared_at_least) if previous.owner == owner else None
    return _from_points(chain, points, shared_at_least) if owner is None else None


def _from_previous(chain: PrefixChain, previous: Known, points: Sequence[P], shared_at_least: int) -> Fork[P] | None:
    shared = shared_length(previous.digests, chain.digests)
    if shared == len(previous.digests) or shared < shared_at_least:
        return None  # carried on (or repeated), or another conversation under the same key
    old = PrefixChain.from_digests(previous.digests)
    on_old, on_new = _begins(old, map(lineage_of, points)), _begins(chain, map(lineage_of, points))
    left = _newest([p for p in points if on_old(lineage_of(p)) and not on_new(lineage_of(p))])
    kept = _longest([p for p in points if on_new(lineage_of(p))])
    messages, tokens = tuple(previous.messages[shared:]), tuple(previous.tokens[shared:])
    return Fork(shared, Lineage.of(old, len(old)), messages, tokens, left, kept)


def _from_points(chain: PrefixChain, points: Sequence[P], shared_at_least: int) -> Fork[P] | None:
    newest = _newest(points)
    if newest is None:
        return None
    below = _chain_of(newest, points)
    on_new = _begins(chain, [*map(lineage_of, points), *below])
    if on_new(lineage_of(newest)):
        return None
    point = max((lineage.length for lineage in below if on_new(lineage)), default=0)
    if point < shared_at_least:
        return None  # nothing stored proves the two share their start
    kept = _longest([p for p in points if on_new(lineage_of(p))])
    return Fork(point, lineage_of(newest), left=newest, kept=kept, seen=False)


def _begins(chain: PrefixChain, lineages: Iterable[Lineage]) -> Callable[[Lineage], bool]:
    """Whether ``chain`` begins with a lineage (one of ``lineages``), the chain hashed once for all."""
    hashes = {length: digest.hex() for length, digest in chain.prefix_hashes(x.length for x in lineages).items()}
    return lambda lineage: lineage.length > 0 and hashes.get(lineage.length) == lineage.prefix


def _newest(points: Sequence[P]) -> P | None:
    return max(points, key=lambda p: (p.created_at, p.end), default=None)


def _longest(points: Sequence[P]) -> P | None:
    return max(points, key=lambda p: (p.end, p.created_at), default=None)


def _chain_of(point: ChainPoint, points: Sequence[ChainPoint]) -> list[Lineage]:
    """The lineages ``point`` was made over, newest first, as far as ``points`` still tell."""
    stored = {lineage_of(p): p for p in points}
    found: list[Lineage] = []
    step = point.base
    while step is not None and step not in found:
        found.append(step)
        below = stored.get(step)
        step = below.base if below is not None else None
    return found

"""Fork detection: did this request leave the branch its session was on, where, and what did that
branch hold? Pure.

Clients are stateless, so a fork is seen only as a request that does not carry on the session's
previous one: the client edited an earlier message, or resent a shorter history and went on
differently (note 003's branch switch). ``detect_fork`` tells from what is known of the session:

* **The previous request, as this process saw it** (``session.known``: its messages, digests and
  token counts). The fork point is exact: the number of leading messages the two share. The
  request forks when it does not repeat all of the previous one; the abandoned branch is the
  previous request's messages from the fork point on, verbatim.
* **Else the stored checkpoint chain** (another replica, or a restart, served the previous
  request; ``Mark``: a checkpoint's end, prefix hash, time, and the checkpoint it was made over).
  The request forks when the session's newest checkpoint is one it does not extend: the session
  was last compacted on another branch. The two branches provably share the longest checkpoint
  of that one's chain (it, the one it was made over, and so on, as far as they are still
  stored) that the request extends; without one, nothing proves the request is the same
  conversation and it is no fork. The fork point is known only to lie at or after that shared
  checkpoint's end; the abandoned branch is the newest checkpoint (what it holds from the fork
  point on is its block kinds' business). A fork in the raw, never-stored part of a branch is
  not visible this way: nothing of it was stored.

Either way the two branches must share at least ``shared_at_least`` leading messages
(``required_shared``): through the first user message, the one that names the conversation;
and for a request without an identity, through the second one. And they must be one owner's
(``owner_of``: the user and scope a request names): two users, or two strangers, who open alike
share a session key (``session.identity``), and one's conversation must never come back as the
other's "earlier branch". A previous request of another owner is no fork; stored checkpoints
do not say whose they were, so a request that names a user or scope forks only from a request
this process saw.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxproxy.session.digest import PrefixChain
from ctxproxy.session.known import Known
from ctxproxy.session.lineage import Lineage, extends
from ctxproxy.vocabulary import ROLE_USER

__all__ = ["Fork", "Mark", "detect_fork", "owner_of", "required_shared", "shared_length"]


@dataclass(frozen=True)
class Mark:
    """A stored checkpoint of the session: its first ``length`` messages hash to ``prefix`` (hex),
    as the checkpoint's ``end`` and ``prefix_hash`` say; stored at ``at`` (unix seconds); made
    over the checkpoint ``base``, if any (``Checkpoint.base``)."""

    length: int
    prefix: str
    at: float
    base: Lineage | None = None

    @property
    def lineage(self) -> Lineage:
        return Lineage(self.length, self.prefix)


@dataclass(frozen=True)
class Fork:
    """The request left a branch. ``point``: the leading messages both branches share (exact
    when ``stored`` is None, else a lower bound). ``tip``: the abandoned branch, as a request on
    it would extend it (its last request, or its newest stored checkpoint). ``messages`` and
    ``tokens``: that branch's messages from ``point`` on and their token counts, when this
    process saw them; else empty, and ``stored`` is the abandoned branch's newest checkpoint."""

    point: int
    tip: Lineage
    messages: tuple[Mapping[str, Any], ...] = ()
    tokens: tuple[int, ...] = ()
    stored: Mark | None = None


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
    chain: PrefixChain, previous: Known | None, marks: Sequence[Mark], *, shared_at_least: int, owner: str | None
) -> Fork | None:
    """The fork ``chain`` (the request's prefix chain) makes from the session's branch, or None
    (module docstring). ``previous``: the session's previous request as this process saw it;
    ``marks``: the session's stored checkpoints; ``owner``: the request's ``owner_of``."""
    if previous is not None:
        return _from_previous(chain, previous, shared_at_least) if previous.owner == owner else None
    return _from_marks(chain, marks, shared_at_least) if owner is None else None


def _from_previous(chain: PrefixChain, previous: Known, shared_at_least: int) -> Fork | None:
    shared = shared_length(previous.digests, chain.digests)
    if shared == len(previous.digests) or shared < shared_at_least:
        return None  # carried on (or repeated), or another conversation under the same key
    tip = Lineage.of(PrefixChain.from_digests(previous.digests), len(previous.digests))
    return Fork(shared, tip, tuple(previous.messages[shared:]), tuple(previous.tokens[shared:]))


def _from_marks(chain: PrefixChain, marks: Sequence[Mark], shared_at_least: int) -> Fork | None:
    if not marks:
        return None
    newest = max(marks, key=lambda m: (m.at, m.length))
    if extends(chain, newest.lineage):
        return None
    point = max((lineage.length for lineage in _chain_of(newest, marks) if extends(chain, lineage)), default=0)
    if point < shared_at_least:
        return None  # nothing stored proves the two share their start
    return Fork(point, newest.lineage, stored=newest)


def _chain_of(mark: Mark, marks: Sequence[Mark]) -> list[Lineage]:
    """The lineages ``mark`` was made over, newest first, as far as the marks still tell."""
    stored = {m.lineage: m for m in marks}
    found: list[Lineage] = []
    step = mark.base
    while step is not None and step not in found:
        found.append(step)
        below = stored.get(step)
        step = below.base if below is not None else None
    return found

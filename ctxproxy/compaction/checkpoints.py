"""Checkpoints in the Store, one read per request through the session's index
(``ctxproxy.store.keys.checkpoints_key``).

The index of a session is one Store entry holding its newest checkpoints. A request may use a
checkpoint only when its own first ``end`` messages hash to the checkpoint's ``prefix_hash``;
of those, the longest wins. An edited history therefore falls back to a checkpoint that ends
before the edit, and a fork to one that ends before the fork.

A checkpoint is written with the fencing token of the compaction lease it was made under; the
index keeps the largest, and a compaction whose lease was taken over (its token is smaller) saves
nothing, so a replica that hung past its lease never overwrites a newer checkpoint.

Beside them the index keeps the session's branch summaries (``branches``, ``KEEPBRANCHES`` of
them; ``ctxproxy.strategies.branch``): checkpoints of their own that cover nothing, inserted into
the requests that carry on the branch each was made for. They are fenced the same way by the
session's branch lease, with a token of their own (``branch_fence``): the two leases are taken
independently, so one's token says nothing of the other's writes.

The index also remembers, per model, the smallest context the upstream refused as too long for
this session (``refused``: the prompt as sent plus the answer's reserve, by ctxproxy's count).
The upstream counts more tokens than ctxproxy does, so from then on the session's window is
taken to be smaller than that: a prompt as large as one that overflowed does not fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from ctxproxy.session import PrefixChain, SessionKey
from ctxproxy.store import JSONValue, Store, StoreError, warn_store_failure
from ctxproxy.store.keys import checkpoints_key
from ctxproxy.strategies.base import Checkpoint, Window
from ctxproxy.strategies.branch import applying

log = structlog.get_logger(__name__)
KEEP = 8  # checkpoints per session index; older ones are dropped first
KEEPBRANCHES = 8  # branch summaries per session index; older ones are dropped first
CHECKPOINTS, BRANCHES = "checkpoints", "branches"
_KEEP = {CHECKPOINTS: KEEP, BRANCHES: KEEPBRANCHES}
_FENCES = {CHECKPOINTS: "fence", BRANCHES: "branch_fence"}  # what each family's writes record


def decode_index(value: Any, family: str = CHECKPOINTS) -> list[Checkpoint]:
    """The checkpoints (or, ``family="branches"``, the branch summaries) of a stored index;
    malformed entries are logged and skipped."""
    if not isinstance(value, dict) or not isinstance(value.get(family), list):
        return []
    found: list[Checkpoint] = []
    for raw in value[family]:
        try:
            found.append(Checkpoint.from_json(raw))
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("checkpoint.malformed", error=type(exc).__name__)
    return found


@dataclass(frozen=True)
class SessionIndex:
    """A session's stored index, decoded: its checkpoints, its branch summaries and what the
    upstream refused."""

    checkpoints: Sequence[Checkpoint] = ()
    refused: Mapping[str, int] = field(default_factory=dict)  # model ("" if none) → context tokens
    branches: Sequence[Checkpoint] = ()

    @classmethod
    def decode(cls, value: Any) -> SessionIndex:
        refused = value.get("refused") if isinstance(value, dict) else None
        valid = {
            str(model): tokens
            for model, tokens in (refused.items() if isinstance(refused, dict) else ())
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0
        }
        return cls(decode_index(value), valid, decode_index(value, BRANCHES))

    def best(self, chain: PrefixChain) -> Checkpoint | None:
        """The longest checkpoint ``chain`` goes on from."""
        return longest_match(self.checkpoints, chain)

    def branches_for(self, chain: PrefixChain, owner: str | None) -> list[Checkpoint]:
        """The branch summaries a request with this prefix chain and owner gets, by position."""
        return applying(self.branches, chain, owner)

    def window(self, window: Window, model: str | None) -> Window:
        """``window``, narrowed below the smallest context the upstream refused for ``model``."""
        refused = self.refused.get(model or "")
        if refused is None or refused > window.context_window:
            return window
        return Window(refused - 1, window.reserve_output)


def with_checkpoint(value: Any, checkpoint: Checkpoint, fence: int | None = None) -> dict[str, Any]:
    """The index with ``checkpoint`` added (replacing one for the same prefix), newest kept, and
    the compaction lease's ``fence`` recorded (the largest one written so far stays)."""
    return _with(value, checkpoint, CHECKPOINTS, fence)


def with_branch(value: Any, branch: Checkpoint, fence: int | None = None) -> dict[str, Any]:
    """The index with the branch summary ``branch`` added (replacing one for the same prefix),
    and the branch lease's ``fence`` recorded (the largest one written so far stays)."""
    return _with(value, branch, BRANCHES, fence)


def _with(value: Any, checkpoint: Checkpoint, family: str, fence: int | None) -> dict[str, Any]:
    same = (checkpoint.end, checkpoint.prefix_hash)
    kept = [c for c in decode_index(value, family) if (c.end, c.prefix_hash) != same]
    kept.append(checkpoint)
    kept.sort(key=lambda c: c.created_at)
    index = {**_others(value), family: [c.to_json() for c in kept[-_KEEP[family] :]]}
    newest = max(f for f in (fence, stored_fence(value, family)) if f is not None) if fence is not None else None
    return index if newest is None else {**index, _FENCES[family]: newest}


def stored_fence(value: Any, family: str = CHECKPOINTS) -> int | None:
    """The largest fencing token a checkpoint (or, ``family="branches"``, a branch summary) of
    this index was written under (None: none yet)."""
    fence = value.get(_FENCES[family]) if isinstance(value, dict) else None
    return fence if isinstance(fence, int) and not isinstance(fence, bool) else None


def fenced_out(value: Any, fence: int | None, family: str = CHECKPOINTS) -> bool:
    """Whether a compaction (or a branch summary) that held the session's lease with ``fence``
    must not write to this index: one that took the lease after it (a larger fence) wrote
    already, so this one lost its lease on the way (``ctxproxy.store.base``: fencing tokens). One
    without a lease (``None``: the store failed, or the wait for the lease timed out) is never
    fenced out."""
    newest = stored_fence(value, family)
    return fence is not None and newest is not None and fence < newest


async def save_fenced(
    store: Store,
    key: SessionKey,
    made: Checkpoint,
    fence: int | None,
    *,
    family: str = CHECKPOINTS,
    events: tuple[str, str],
) -> bool:
    """Add ``made`` to ``key``'s index with ``fence`` (``with_checkpoint``, or ``with_branch`` for
    ``family="branches"``) unless it is fenced out; whether it was saved. A store failure is
    logged (``events[0]``, ``….not_saved``), and so is a write fenced out (``events[1]``,
    ``….fenced``: nothing is written); the caller forwards ``made`` all the same."""
    newer: list[int | None] = [None]  # the fence that outranks ours, as the last attempt read it

    def save(index: JSONValue | None) -> JSONValue | None:
        newer[0] = stored_fence(index, family) if fenced_out(index, fence, family) else None
        return index if newer[0] is not None else _with(index, made, family, fence)

    try:
        await store.update(checkpoints_key(key), save)
    except StoreError as exc:
        warn_store_failure(log, exc, events[0], session=key.value, error=str(exc))
        return False
    if newer[0] is not None:  # right for this request all the same
        log.warning(events[1], session=key.value, fence=fence, newer_fence=newer[0])
        return False
    return True


def with_refusal(value: Any, model: str | None, tokens: int) -> dict[str, Any]:
    """The index remembering that the upstream refused ``tokens`` of context for ``model``."""
    refused = dict(SessionIndex.decode(value).refused)
    refused[model or ""] = min(tokens, refused.get(model or "", tokens))
    return {**_others(value), "refused": refused}


def _others(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def longest_match(checkpoints: Sequence[Checkpoint], chain: PrefixChain) -> Checkpoint | None:
    """Longest first, so the usual case (the newest checkpoint still matches) costs one hash — or
    none: a chain that goes on from the previous request's has the hashes that one was asked for
    (``PrefixChain.hashed``)."""
    for checkpoint in sorted(checkpoints, key=lambda c: c.end, reverse=True):
        if checkpoint.end >= len(chain):
            continue  # the last message is never covered
        if chain.prefix_hash(checkpoint.end).hex() == checkpoint.prefix_hash:
            return checkpoint
    return None

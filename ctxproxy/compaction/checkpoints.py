"""Checkpoints in the Store, one read per request through the session's index
(``ctxproxy.store.keys.checkpoints_key``).

The index of a session is one Store entry holding its newest checkpoints. A request may use a
checkpoint only when its own first ``end`` messages hash to the checkpoint's ``prefix_hash``;
of those, the longest wins. An edited history therefore falls back to a checkpoint that ends
before the edit, and a fork to one that ends before the fork.

A checkpoint is written with the fencing token of the compaction lease it was made under; the
index keeps the largest, and a compaction whose lease was taken over (its token is smaller) saves
nothing, so a replica that hung past its lease never overwrites a newer checkpoint.

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

from ctxproxy.session import PrefixChain
from ctxproxy.strategies.base import Checkpoint, Window

log = structlog.get_logger(__name__)
KEEP = 8  # checkpoints per session index; older ones are dropped first


def decode_index(value: Any) -> list[Checkpoint]:
    """The checkpoints of a stored index; malformed entries are logged and skipped."""
    if not isinstance(value, dict) or not isinstance(value.get("checkpoints"), list):
        return []
    found: list[Checkpoint] = []
    for raw in value["checkpoints"]:
        try:
            found.append(Checkpoint.from_json(raw))
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("checkpoint.malformed", error=type(exc).__name__)
    return found


@dataclass(frozen=True)
class SessionIndex:
    """A session's stored index, decoded: its checkpoints and what the upstream refused."""

    checkpoints: Sequence[Checkpoint] = ()
    refused: Mapping[str, int] = field(default_factory=dict)  # model ("" if none) → context tokens

    @classmethod
    def decode(cls, value: Any) -> SessionIndex:
        refused = value.get("refused") if isinstance(value, dict) else None
        valid = {
            str(model): tokens
            for model, tokens in (refused.items() if isinstance(refused, dict) else ())
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0
        }
        return cls(decode_index(value), valid)

    def best(self, chain: PrefixChain) -> Checkpoint | None:
        return longest_match(self.checkpoints, chain)

    def window(self, window: Window, model: str | None) -> Window:
        """``window``, narrowed below the smallest context the upstream refused for ``model``."""
        refused = self.refused.get(model or "")
        if refused is None or refused > window.context_window:
            return window
        return Window(refused - 1, window.reserve_output)


def with_checkpoint(value: Any, checkpoint: Checkpoint, fence: int | None = None) -> dict[str, Any]:
    """The index with ``checkpoint`` added (replacing one for the same prefix), newest kept, and
    the compaction lease's ``fence`` recorded (the largest one written so far stays)."""
    kept = [c for c in decode_index(value) if (c.end, c.prefix_hash) != (checkpoint.end, checkpoint.prefix_hash)]
    kept.append(checkpoint)
    kept.sort(key=lambda c: c.created_at)
    index = {**_others(value), "checkpoints": [c.to_json() for c in kept[-KEEP:]]}
    newest = max(f for f in (fence, stored_fence(value)) if f is not None) if fence is not None else None
    return index if newest is None else {**index, "fence": newest}


def stored_fence(value: Any) -> int | None:
    """The largest fencing token a checkpoint of this index was written under (None: none yet)."""
    fence = value.get("fence") if isinstance(value, dict) else None
    return fence if isinstance(fence, int) and not isinstance(fence, bool) else None


def fenced_out(value: Any, fence: int | None) -> bool:
    """Whether a compaction that held the session's lease with ``fence`` must not write to this
    index: one that took the lease after it (a larger fence) wrote already, so this one lost its
    lease on the way (``ctxproxy.store.base``: fencing tokens). A compaction without a lease
    (``None``: the store failed, or the wait for the lease timed out) is never fenced out."""
    newest = stored_fence(value)
    return fence is not None and newest is not None and fence < newest


def with_refusal(value: Any, model: str | None, tokens: int) -> dict[str, Any]:
    """The index remembering that the upstream refused ``tokens`` of context for ``model``."""
    refused = dict(SessionIndex.decode(value).refused)
    refused[model or ""] = min(tokens, refused.get(model or "", tokens))
    return {**_others(value), "refused": refused}


def _others(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def longest_match(checkpoints: Sequence[Checkpoint], chain: PrefixChain) -> Checkpoint | None:
    """Longest first, so the usual case (the newest checkpoint still matches) costs one hash."""
    for checkpoint in sorted(checkpoints, key=lambda c: c.end, reverse=True):
        if checkpoint.end >= len(chain):
            continue  # the last message is never covered
        if chain.prefix_hash(checkpoint.end).hex() == checkpoint.prefix_hash:
            return checkpoint
    return None

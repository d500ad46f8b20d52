"""Checkpoints in the Store, one read per request through the session's index
(``ctxproxy.store.keys.checkpoints_key``).

The index of a session is one Store entry holding its newest checkpoints. A request may use a
checkpoint only when its own first ``end`` messages hash to the checkpoint's ``prefix_hash``;
of those, the longest wins. An edited history therefore falls back to a checkpoint that ends
before the edit, and a fork to one that ends before the fork.

Beside them the index keeps the session's branch summaries (``branches``, ``KEEP_BRANCHES`` of
them; ``ctxproxy.strategies.branch``): checkpoints of their own that cover nothing, inserted into
the requests that carry on the branch each was made for.

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
from ctxproxy.session.fork import Mark
from ctxproxy.strategies.base import Checkpoint, Window
from ctxproxy.strategies.branch import applying

log = structlog.get_logger(__name__)
KEEP = 8  # checkpoints per session index; older ones are dropped first
KEEP_BRANCHES = 8  # branch summaries per session index; older ones are dropped first
_CHECKPOINTS, _BRANCHES = "checkpoints", "branches"


def decode_index(value: Any, family: str = _CHECKPOINTS) -> list[Checkpoint]:
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
        return cls(decode_index(value), valid, decode_index(value, _BRANCHES))

    def best(self, chain: PrefixChain) -> Checkpoint | None:
        return longest_match(self.checkpoints, chain)

    def branches_for(self, chain: PrefixChain, owner: str | None) -> list[Checkpoint]:
        """The branch summaries a request with this prefix chain and owner gets, by position."""
        return applying(self.branches, chain, owner)

    @property
    def marks(self) -> list[Mark]:
        """The checkpoints as fork detection reads them (``ctxproxy.session.fork``)."""
        return [Mark(c.end, c.prefix_hash, c.created_at, c.base) for c in self.checkpoints]

    def window(self, window: Window, model: str | None) -> Window:
        """``window``, narrowed below the smallest context the upstream refused for ``model``."""
        refused = self.refused.get(model or "")
        if refused is None or refused > window.context_window:
            return window
        return Window(refused - 1, window.reserve_output)


def with_checkpoint(value: Any, checkpoint: Checkpoint) -> dict[str, Any]:
    """The index with ``checkpoint`` added (replacing one for the same prefix), newest kept."""
    return _with(value, checkpoint, _CHECKPOINTS, KEEP)


def with_branch(value: Any, branch: Checkpoint) -> dict[str, Any]:
    """The index with the branch summary ``branch`` added (replacing one for the same prefix)."""
    return _with(value, branch, _BRANCHES, KEEP_BRANCHES)


def _with(value: Any, checkpoint: Checkpoint, family: str, keep: int) -> dict[str, Any]:
    same = (checkpoint.end, checkpoint.prefix_hash)
    kept = [c for c in decode_index(value, family) if (c.end, c.prefix_hash) != same]
    kept.append(checkpoint)
    kept.sort(key=lambda c: c.created_at)
    return {**_others(value), family: [c.to_json() for c in kept[-keep:]]}


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

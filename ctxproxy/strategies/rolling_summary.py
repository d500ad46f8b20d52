"""``rolling_summary`` (note 001): one rolling summary, updated whenever the prompt grows too big.

Trigger (``trigger_reason``), with ``forwarded = conv.forwarded_tokens(checkpoint)`` (head +
current summary + uncovered messages) and ``budget`` = context window − the request's
``max_tokens``:

- ``"threshold"``: ``forwarded ≥ threshold × budget``;
- ``"headroom"``: ``budget − forwarded < max(headroom_ratio × context_window, headroom_min_tokens)``.

Range (``find_cut``): the kept tail is the newest messages whose tokens fit in
``target_ratio × budget`` once the system messages and a full summary message (its text at
``summary_max_tokens``, plus its header, role and name) are counted, but never fewer than
``min_messages_to_keep`` messages. Where the target boundary falls on a tool result the cut
moves forward (keeps less, the target still holds) as far as the minimum allows, else back
(keeps more). The plan covers ``[start, cut)``, ``start`` being the current checkpoint's end
(or the head), with ``merge`` set: the previous summary is updated with the newly removed
messages, never stacked.

Plan invariants: ``start < end ≤ total − min_messages_to_keep ≤ total − 1`` and ``end`` is a
valid cut. When no such cut exists (the newest messages alone are too big, or they are all that
is left uncovered), the plan is None: the emergency path is not this module's.
"""

from __future__ import annotations

from typing import ClassVar, Self

from pydantic import Field, model_validator

from ctxproxy.strategies.base import SYSTEM_ROLES, Checkpoint, Conversation, Plan, StrategyOptions
from ctxproxy.strategies.boundaries import valid_cut_at_or_after, valid_cut_at_or_before
from ctxproxy.strategies.traits import StrategyTraits


class RollingSummaryOptions(StrategyOptions):
    threshold: float = Field(default=0.8, gt=0, le=1)
    headroom_ratio: float = Field(default=0.1, ge=0, lt=1)
    headroom_min_tokens: int = Field(default=2000, ge=0)
    min_messages_to_keep: int = Field(default=4, ge=1)
    target_ratio: float = Field(default=0.6, gt=0, lt=1)
    summary_max_tokens: int = Field(default=1200, gt=0)

    @model_validator(mode="after")
    def _target_below_threshold(self) -> Self:
        if self.target_ratio >= self.threshold:
            raise ValueError(
                f"target_ratio ({self.target_ratio}) must be below threshold ({self.threshold}): "
                "a compaction must leave the prompt under the level that triggers the next one"
            )
        return self


def trigger_reason(conv: Conversation, checkpoint: Checkpoint | None, options: RollingSummaryOptions) -> str | None:
    forwarded = conv.forwarded_tokens(checkpoint)
    budget = conv.window.budget
    if forwarded >= options.threshold * budget:
        return "threshold"
    headroom = max(options.headroom_ratio * conv.window.context_window, options.headroom_min_tokens)
    # In a small window the 2000-token minimum would ask for more room than a compaction to the
    # target frees, and every request would compact again: never ask for more than that.
    headroom = min(headroom, (1 - options.target_ratio) * budget)
    if budget - forwarded < headroom:
        return "headroom"
    return None


def target_cut(conv: Conversation, options: RollingSummaryOptions) -> int:
    """The smallest ``c`` whose prompt (system messages + full summary message + non-system
    ``[c:]``) fits the target.

    System messages are forwarded verbatim wherever they are, so they cost the same for every
    cut; ``conv.total`` when not even the newest message fits.
    """
    system = sum(t for m, t in zip(conv.messages, conv.tokens, strict=True) if m.get("role") in SYSTEM_ROLES)
    room = options.target_ratio * conv.window.budget - system - conv.summary_allowance(options.summary_max_tokens)
    cut = conv.total
    for i in range(conv.total - 1, -1, -1):
        if conv.messages[i].get("role") not in SYSTEM_ROLES:
            room -= conv.tokens[i]
        if room < 0:
            break
        cut = i
    return cut


def find_cut(conv: Conversation, start: int, options: RollingSummaryOptions) -> int | None:
    """The valid cut ``c`` with ``start < c ≤ total − min_messages_to_keep`` closest to the target."""
    latest = conv.total - options.min_messages_to_keep
    if latest <= start:
        return None
    aim = min(max(target_cut(conv, options), start + 1), latest)
    forward = valid_cut_at_or_after(conv.messages, aim, latest + 1)
    return forward if forward is not None else valid_cut_at_or_before(conv.messages, aim, start)


class RollingSummary:
    name: ClassVar[str] = "rolling_summary"
    options_model: ClassVar[type[StrategyOptions]] = RollingSummaryOptions
    traits: ClassVar[StrategyTraits] = StrategyTraits(memory_by_default=True)  # note 001's memory cards

    def __init__(self, options: StrategyOptions) -> None:
        if not isinstance(options, RollingSummaryOptions):
            raise TypeError(f"rolling_summary needs RollingSummaryOptions, got {type(options).__name__}")
        self.options = options

    def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None:
        reason = trigger_reason(conv, checkpoint, self.options)
        if reason is None:
            return None
        start = conv.head if checkpoint is None else max(checkpoint.end, conv.head)
        cut = find_cut(conv, start, self.options)
        if cut is None:
            return None
        # The cut assumed a summary of at most summary_max_tokens: hold the summariser to it
        # (the executor takes the smaller of this and the tenant's [compaction] budget).
        return Plan(start=start, end=cut, reason=reason, merge=True, max_tokens=self.options.summary_max_tokens)


STRATEGY = RollingSummary

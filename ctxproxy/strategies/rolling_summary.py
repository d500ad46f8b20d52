"""``rolling_summary`` (note 001): one rolling summary, updated whenever the prompt grows too big.

Trigger (``trigger_reason``), with ``forwarded = conv.forwarded_tokens(checkpoint)`` (head +
current summary + uncovered messages) and ``budget`` = context window − the request's
``max_tokens``:

- ``"threshold"``: ``forwarded ≥ threshold × budget``;
- ``"headroom"``: ``budget − forwarded < max(headroom_ratio × context_window, headroom_min_tokens)``,
  the headroom capped so that it never fires below the target: at ``(1 − target) × budget``,
  and with ``optimise = "cost"`` at ``(1 − target − COST_GAP) × budget`` (in an 8k window the
  2000-token minimum would otherwise fire just above the target, and compact every few turns).

Range (``find_cut``): the kept tail is the newest messages whose tokens fit in
``target × budget`` once the system messages and a full summary message (its text at the
summary budget, plus its header, role and name) are counted, but never fewer than
``min_messages_to_keep`` messages. Where the target boundary falls on a tool result the cut
moves forward (keeps less, the target still holds) as far as the minimum allows, else back
(keeps more). The plan covers ``[start, cut)``, ``start`` being the current checkpoint's end
(or the head), with ``merge`` set: the previous summary is updated with the newly removed
messages, never stacked.

Defaults (``RollingSummaryOptions.target``, ``summary_tokens``): the note aims at 0.6 of the
budget, which is ``target_ratio`` unset with ``optimise = "tokens"`` (3/4 of ``threshold``);
with ``"cost"`` it aims lower, at 0.5 (5/8 of ``threshold``), so the turns between two
compactions are more (the prompt grows from half the budget to 0.8 of it before the next) —
lower still when turns are so large that few would fit in between (``hysteresis.low_water``).
``summary_max_tokens`` unset is the request's summary budget (the tenant's, or 15 % of the
budget, at most 1200: a 1200-token summary would take a third of a 4k window). With ``"cost"``
a plan that would leave the prompt within ``hysteresis.MIN_ROOM`` of the trigger (the newest
``min_messages_to_keep`` messages are that large) waits until the prompt does not fit.

Plan invariants: ``start < end ≤ total − min_messages_to_keep ≤ total − 1`` and ``end`` is a
valid cut. When no such cut exists (the newest messages alone are too big, or they are all that
is left uncovered), the plan is None: the emergency path is not this module's.
"""

from __future__ import annotations

from typing import ClassVar, Self

from pydantic import Field, model_validator

from ctxproxy.strategies.base import Checkpoint, Conversation, Optimise, Plan, StrategyOptions
from ctxproxy.strategies.hysteresis import crowded, cut_to, leaves_room, low_water
from ctxproxy.strategies.traits import StrategyTraits

# ``target_ratio`` unset: this share of ``threshold`` (0.6 with "tokens", as the note; 0.5 with "cost").
TARGET_OF_THRESHOLD: dict[Optimise, float] = {"tokens": 0.75, "cost": 0.625}
COST_GAP = 0.25  # cost: the headroom rule fires at least this share of the budget above the target


class RollingSummaryOptions(StrategyOptions):
    """``None``: unset, resolved per request (``target``, ``summary_tokens``)."""

    threshold: float = Field(default=0.8, gt=0, le=1)
    headroom_ratio: float = Field(default=0.1, ge=0, lt=1)
    headroom_min_tokens: int = Field(default=2000, ge=0)
    min_messages_to_keep: int = Field(default=4, ge=1)
    target_ratio: float | None = Field(default=None, gt=0, lt=1)
    summary_max_tokens: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _target_below_threshold(self) -> Self:
        if self.target_ratio is not None and self.target_ratio >= self.threshold:
            raise ValueError(
                f"target_ratio ({self.target_ratio}) must be below threshold ({self.threshold}): "
                "a compaction must leave the prompt under the level that triggers the next one"
            )
        return self

    def target(self, optimise: Optimise) -> float:
        """The share of the budget a compaction aims at."""
        if self.target_ratio is not None:
            return self.target_ratio
        return self.threshold * TARGET_OF_THRESHOLD[optimise]

    def summary_tokens(self, conv: Conversation) -> int:
        """The summary's budget in this request."""
        return self.summary_max_tokens if self.summary_max_tokens is not None else conv.summary_budget

    def trigger(self, conv: Conversation) -> tuple[float, float]:
        """``(threshold, headroom)`` in tokens: compact at ``forwarded ≥ threshold`` or when fewer
        than ``headroom`` tokens of the budget are left."""
        budget = conv.window.budget
        headroom = max(self.headroom_ratio * conv.window.context_window, self.headroom_min_tokens)
        # In a small window the 2000-token minimum would ask for more room than a compaction to the
        # target frees, and every request would compact again: never ask for more than that.
        gap = COST_GAP if conv.optimise == "cost" else 0.0
        headroom = min(headroom, max(0.0, 1 - self.target(conv.optimise) - gap) * budget)
        return self.threshold * budget, headroom

    def crowding(self, blank: Conversation) -> str | None:
        budget = blank.window.budget
        threshold, headroom = self.trigger(blank)
        trigger, target = min(threshold, budget - headroom), self.target(blank.optimise) * budget
        summary = blank.summary_allowance(self.summary_tokens(blank))
        window = blank.window.context_window
        if summary >= target:
            return (
                f"at a {window}-token window its summary (up to {summary} tokens) takes all of the "
                f"{int(target)} a compaction aims at: lower summary_max_tokens or raise target_ratio"
            )
        if not crowded(blank, trigger, target):
            return None
        instead = ', or set [compaction] optimise = "cost"' if blank.optimise == "tokens" else ""
        return (
            f"at a {window}-token window it compacts at {int(trigger)} prompt tokens and aims at {int(target)}: "
            f"lower target_ratio or headroom_min_tokens, or raise threshold{instead}"
        )


def trigger_reason(conv: Conversation, checkpoint: Checkpoint | None, options: RollingSummaryOptions) -> str | None:
    forwarded = conv.forwarded_tokens(checkpoint)
    threshold, headroom = options.trigger(conv)
    if forwarded >= threshold:
        return "threshold"
    if conv.window.budget - forwarded < headroom:
        return "headroom"
    return None


def find_cut(conv: Conversation, start: int, options: RollingSummaryOptions) -> int | None:
    """The valid cut ``c`` with ``start < c ≤ total − min_messages_to_keep`` closest to the target."""
    ratio = options.target(conv.optimise)
    unset = options.target_ratio is None and conv.optimise == "cost"
    target = low_water(conv, ratio, options.threshold) if unset else ratio * conv.window.budget
    allowance = conv.summary_allowance(options.summary_tokens(conv))
    return cut_to(conv, start, target, allowance, conv.total - options.min_messages_to_keep)


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
        summary = self.options.summary_tokens(conv)
        threshold, headroom = self.options.trigger(conv)
        after = conv.tokens_with_cut(cut, conv.summary_allowance(summary))
        if not leaves_room(conv, checkpoint, after, min(threshold, conv.window.budget - headroom)):
            return None
        # The cut assumed a summary of at most ``summary``: hold the summariser to it (the
        # executor takes the smaller of this and the tenant's [compaction] budget).
        return Plan(start=start, end=cut, reason=reason, merge=True, max_tokens=summary)


STRATEGY = RollingSummary

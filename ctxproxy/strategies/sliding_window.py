"""``sliding_window`` (note 000): consolidate old messages in batches, counted in messages.

The note's rules count messages, not tokens; every count below is a number of messages. ``last_consolidated`` is where
the raw history begins: the checkpoint's ``end``, or ``conv.head`` before the first
consolidation. The note indexes a session's messages from 0; here the leading system/developer
messages (the head) are never consolidated, so the note's indices are shifted by ``conv.head``:
all counts are over the non-head messages. With ``total = conv.total``::

    0 .. head-1 | head .. last_consolidated-1 | last_consolidated .. compress_end-1 | tail_keep_size
       head     |     already summarised      |        candidates (delta)          |   kept raw

    compress_end = total - tail_keep_size
    delta        = compress_end - last_consolidated

Nothing happens while ``compress_end <= last_consolidated`` (the early stop). Otherwise a
consolidation is planned when a rule fires; they are checked in this order and the first one
that fires is the plan's ``reason``:

- ``window``:       ``delta >= compression_window_size``
- ``hard_limit``:   ``delta >= compression_hard_limit``
- ``cooldown``:     ``now - checkpoint.created_at >= compression_cooldown_sec``. The checkpoint's
                    ``created_at`` is the note's ``last_consolidated_at``; with no checkpoint there
                    has been no consolidation to cool down from, so this rule does not fire.
- ``context_size``: ``total - last_consolidated > context_size``, a safety net: the raw history
                    would exceed the number of messages the model should see.

``compression_window_size`` unset: the note's 12 with ``optimise = "tokens"``; with ``"cost"``
``compression_hard_limit`` (30), so a consolidation covers 30 messages rather than 12 and the
prompt cache breaks once per ~15 turns rather than ~6 (the hard limit then is the window).

Messages are not tokens: forty messages of an agent's tool results overflow any window. So one
more rule, ``tokens``, not in the note: when the prompt as forwarded reaches
``hysteresis.HIGH_WATER`` of the budget, the consolidation goes on to where the prompt (with a
full summary) takes at most the low-water mark (``hysteresis.low_water``), keeping fewer than
``tail_keep_size`` messages if it must (the newest always). It fires in either mode: without it
the emergency plan would cut instead, and with ``optimise = "cost"`` only when it leaves room
before the next (``hysteresis.leaves_room``).

The plan covers ``messages[last_consolidated:compress_end]`` (or up to the ``tokens`` rule's
cut, when that lies further) and is merged into the rolling summary (``merge=True``). If
``compress_end`` would separate tool results from their call, the end moves back to the nearest
valid cut (more stays raw); if none lies above ``last_consolidated``, there is no plan.
``compress_end <= total - 1`` since ``tail_keep_size >= 1``, so the newest message is never covered.

The note's single-flight (``is_consolidating`` / ``pending_consolidation``) is the executor's
job: ``plan`` is pure and can be called again at any time with the newest checkpoint.
"""

from __future__ import annotations

from typing import ClassVar, Self

from pydantic import NonNegativeFloat, PositiveInt, model_validator

from ctxproxy.strategies.base import Checkpoint, Conversation, Optimise, Plan, StrategyOptions
from ctxproxy.strategies.boundaries import valid_cut_at_or_before
from ctxproxy.strategies.hysteresis import HIGH_WATER, cut_to, leaves_room, low_water, share

NOTE_WINDOW = 12  # the note's compression_window_size, the default with optimise = "tokens"


class SlidingWindowOptions(StrategyOptions):
    context_size: PositiveInt = 75
    compression_window_size: PositiveInt | None = None  # unset: see ``window``
    tail_keep_size: PositiveInt = 40
    compression_cooldown_sec: NonNegativeFloat = 900.0
    compression_hard_limit: PositiveInt = 30

    @model_validator(mode="after")
    def _tail_inside_context(self) -> Self:
        if self.tail_keep_size >= self.context_size:
            raise ValueError(
                f"tail_keep_size ({self.tail_keep_size}) must be less than context_size ({self.context_size})"
            )
        return self

    def window(self, optimise: Optimise) -> int:
        """``compression_window_size``, or unset: 12 (tokens) or ``compression_hard_limit`` (cost)."""
        if self.compression_window_size is not None:
            return self.compression_window_size
        return NOTE_WINDOW if optimise == "tokens" else self.compression_hard_limit

    def crowding(self, blank: Conversation) -> str | None:
        # A turn adds two messages at least (the answer and the next question).
        if min(self.window(blank.optimise), self.compression_hard_limit) <= 2:
            return "it consolidates on every turn: raise compression_window_size and compression_hard_limit"
        if self.compression_cooldown_sec == 0:
            return "with no cooldown it consolidates on every turn once it has begun: raise compression_cooldown_sec"
        return None


class SlidingWindow:
    name: ClassVar[str] = "sliding_window"
    options_model: ClassVar[type[StrategyOptions]] = SlidingWindowOptions

    def __init__(self, options: StrategyOptions) -> None:
        if not isinstance(options, SlidingWindowOptions):
            raise TypeError(f"{self.name} needs SlidingWindowOptions, got {type(options).__name__}")
        self.options = options

    def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None:
        last_consolidated = conv.head if checkpoint is None else max(checkpoint.end, conv.head)
        compress_end = conv.total - self.options.tail_keep_size
        reason, end = None, None
        if compress_end > last_consolidated:
            reason = self._trigger(conv, last_consolidated, compress_end, checkpoint, now)
        if reason is not None:
            end = valid_cut_at_or_before(conv.messages, compress_end, floor=last_consolidated)
        by_tokens = self._tokens_cut(conv, checkpoint, last_consolidated)
        if by_tokens is not None and (end is None or by_tokens > end):
            reason, end = "tokens", by_tokens
        if reason is None or end is None:
            return None
        # The note's persisted field; the planner itself reads the checkpoint's ``end``.
        return Plan(start=last_consolidated, end=end, reason=reason, merge=True, state={"last_consolidated": end})

    def _tokens_cut(self, conv: Conversation, checkpoint: Checkpoint | None, start: int) -> int | None:
        """The ``tokens`` rule's cut, when the prompt has reached the high-water mark (above)."""
        high = share(conv, HIGH_WATER)
        if conv.forwarded_tokens(checkpoint) < high:
            return None
        allowance = conv.summary_allowance(conv.summary_budget)
        cut = cut_to(conv, start, low_water(conv), allowance, conv.total - 1)
        if cut is None or not leaves_room(conv, checkpoint, conv.tokens_with_cut(cut, allowance), high):
            return None
        return cut

    def _trigger(
        self, conv: Conversation, last_consolidated: int, compress_end: int, checkpoint: Checkpoint | None, now: float
    ) -> str | None:
        """The first message rule that fires, or None. Requires ``compress_end > last_consolidated``."""
        options = self.options
        total = conv.total
        delta = compress_end - last_consolidated
        if delta >= options.window(conv.optimise):
            return "window"
        if delta >= options.compression_hard_limit:
            return "hard_limit"
        if checkpoint is not None and now - checkpoint.created_at >= options.compression_cooldown_sec:
            return "cooldown"
        if total - last_consolidated > options.context_size:
            return "context_size"
        return None


STRATEGY = SlidingWindow

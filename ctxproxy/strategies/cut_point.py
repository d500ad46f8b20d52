"""``cut_point`` (note 003): keep the newest ``keep_recent_tokens``, summarise what is older.

Trigger: the prompt as it would be forwarded now (head + current summary + uncovered messages,
``Conversation.forwarded_tokens``) exceeds ``budget − reserve_tokens``, where the budget is the
context window minus the request's ``max_tokens``.

Defaults (``CutPointOptions.resolved``): the note's ``reserve_tokens`` 16384 and
``keep_recent_tokens`` 20000 assume a ~128k window (an 8k window is smaller than the reserve, so
every compaction would be the emergency plan). Left unset they are ``RESERVE_SHARE`` and
``KEEP_SHARE`` of the request's budget, at most the note's values: a compaction triggers at
about 85 % of the budget and keeps about a quarter of it, leaving room for many turns before
the next. A configured value is used as it is. With ``optimise = "cost"`` a cut that would
leave the prompt within ``hysteresis.MIN_ROOM`` of the trigger (a keep too large for the
window) is not made while the prompt fits (``hysteresis.leaves_room``).

Cut (``find_cut_point``): walk back from the newest message summing tokens until the sum reaches
``keep_recent_tokens``; the message where it is reached is the first kept one. Then move to the
nearest valid cut at or *before* it, so at least ``keep_recent_tokens`` stay raw and a tool
result never starts the kept part (a call stays with its results). The note's 8-message example
(500, 800, 1200, 3000, 5000, 8000, 4000, 2000 tokens) keeps msg4..msg8 (22000 ≥ 20000).

Plan invariants: ``start < end ≤ total − 1``, ``end`` is a valid cut, and ``start`` is the
current checkpoint's end (or the head without one). If the walk reaches ``start`` before the
sum reaches ``keep_recent_tokens``, there is nothing to compact and the plan is None.

Split turn: when the first kept message is not a user message, the cut falls inside a turn. If
the user message that opened it lies after ``start`` and the turn makes no tool call
(``plain_turn``: a chat reply, nothing that needs a summary of its own), the cut moves back to
that user message, a turn boundary, and the whole turn stays raw — unless the prompt cut there
would still be over the trigger (the compaction would not settle). A turn with tool calls keeps
the cut: ``turn_start`` is the user message's index and the executor summarises
``[start, turn_start)`` and ``[turn_start, end)`` separately.

Iterative: ``merge`` is always set, so an existing summary is updated with the new range.
Files read and modified by tool calls of every covered range are carried in ``state``
(``files_read`` lists files only read, ``files_modified`` files written at least once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import Field

from ctxproxy.strategies.base import Checkpoint, Conversation, Message, Plan, StrategyOptions
from ctxproxy.strategies.boundaries import turn_start, valid_cut_at_or_before
from ctxproxy.strategies.file_ops import FileOps, extract_file_ops, tool_calls
from ctxproxy.strategies.hysteresis import CROWDED, crowded, leaves_room, scaled
from ctxproxy.strategies.traits import StrategyTraits
from ctxproxy.vocabulary import RESULT_ROLES, ROLE_USER

RESERVE_TOKENS, RESERVE_SHARE = 16384, 0.15  # the note's reserve; unset: this share of the budget, at most that
KEEP_TOKENS, KEEP_SHARE = 20000, 0.25  # likewise the kept tokens


class CutPointOptions(StrategyOptions):
    """``None``: unset, scaled to the request's budget (``resolved``)."""

    reserve_tokens: int | None = Field(default=None, ge=0)
    keep_recent_tokens: int | None = Field(default=None, gt=0)

    def resolved(self, budget: int) -> tuple[int, int]:
        """``(reserve_tokens, keep_recent_tokens)`` for a request whose prompt may take ``budget``."""
        return (
            scaled(self.reserve_tokens, RESERVE_SHARE, RESERVE_TOKENS, budget, floor=0),
            scaled(self.keep_recent_tokens, KEEP_SHARE, KEEP_TOKENS, budget),
        )

    def crowding(self, blank: Conversation) -> str | None:
        budget = blank.window.budget
        reserve, keep = self.resolved(budget)
        trigger, summary = budget - reserve, blank.summary_allowance(blank.summary_budget)
        if not crowded(blank, trigger, keep + summary):
            return None
        unset = CutPointOptions().resolved(budget)
        most = int(trigger - summary - CROWDED * budget)
        change = (
            f"lower keep_recent_tokens to at most {most}" if most > 0 else "lower reserve_tokens and keep_recent_tokens"
        )
        when = f"above {trigger} prompt tokens" if trigger > 0 else f"always (reserve_tokens {reserve} ≥ the budget)"
        return (
            f"at a {blank.window.context_window}-token window (a prompt budget of {budget}) it compacts {when} "
            f"and keeps at least {keep} tokens plus a summary of up to {summary}: {change}, or leave "
            f"reserve_tokens and keep_recent_tokens unset (they scale with the window: {unset[0]} and {unset[1]} here)"
        )


def range_start(conv: Conversation, checkpoint: Checkpoint | None) -> int:
    """First message not yet covered: the checkpoint's end, or the first one after the head."""
    return conv.head if checkpoint is None else max(checkpoint.end, conv.head)


def first_kept_index(conv: Conversation, start: int, keep_recent_tokens: int) -> int | None:
    """Where the walk back from the newest message first reaches ``keep_recent_tokens``."""
    kept = 0
    for i in range(conv.total - 1, start, -1):
        kept += conv.tokens[i]
        if kept >= keep_recent_tokens:
            return i
    return None


def find_cut_point(conv: Conversation, start: int, keep_recent_tokens: int) -> int | None:
    """The valid cut ``c`` (``start < c``) keeping at least ``keep_recent_tokens``, else None."""
    first_kept = first_kept_index(conv, start, keep_recent_tokens)
    if first_kept is None:
        return None
    return valid_cut_at_or_before(conv.messages, first_kept, start)


def split_turn_start(conv: Conversation, start: int, cut: int) -> int | None:
    """The opening user message of the turn that ``cut`` splits, when it lies after ``start``."""
    if conv.messages[cut].get("role") == ROLE_USER:
        return None
    opened = turn_start(conv.messages, cut, start)
    return opened if opened > start else None


def plain_turn(messages: Sequence[Message], opened: int) -> bool:
    """The turn opened at ``opened`` (up to the next user message) makes no tool call."""
    for message in messages[opened + 1 :]:
        role = message.get("role")
        if role == ROLE_USER:
            return True
        if role in RESULT_ROLES or next(tool_calls(message), None) is not None:
            return False
    return True


def turn_cut(conv: Conversation, start: int, cut: int, trigger: int) -> tuple[int, int | None]:
    """``(cut, turn_start)``: a cut inside a turn without tool calls moves back to its user
    message when the prompt cut there is still at most ``trigger`` (the compaction settles);
    otherwise, and inside a turn with tool calls, it stays and the turn's start is summarised apart."""
    split = split_turn_start(conv, start, cut)
    if split is not None and plain_turn(conv.messages, split):
        if conv.tokens_with_cut(split, conv.summary_allowance(conv.summary_budget)) <= trigger:
            return split, None
    return cut, split


def previous_file_ops(checkpoint: Checkpoint | None) -> FileOps:
    if checkpoint is None:
        return FileOps()
    return FileOps(_string_set(checkpoint.state, "files_read"), _string_set(checkpoint.state, "files_modified"))


def _string_set(state: Mapping[str, Any], key: str) -> frozenset[str]:
    value = state.get(key)
    if not isinstance(value, list | tuple):
        return frozenset()
    return frozenset(v for v in value if isinstance(v, str))


def carried_file_ops(previous: FileOps, covered: FileOps) -> dict[str, list[str]]:
    """The checkpoint state: every file seen so far, a modified one only under ``files_modified``."""
    modified = previous.modified | covered.modified
    read = (previous.read | covered.read) - modified
    return {"files_read": sorted(read), "files_modified": sorted(modified)}


class CutPoint:
    name: ClassVar[str] = "cut_point"
    options_model: ClassVar[type[StrategyOptions]] = CutPointOptions
    traits: ClassVar[StrategyTraits] = StrategyTraits(memory_by_default=True)

    def __init__(self, options: StrategyOptions) -> None:
        if not isinstance(options, CutPointOptions):
            raise TypeError(f"cut_point needs CutPointOptions, got {type(options).__name__}")
        self.options = options

    def trigger(self, conv: Conversation) -> int:
        """Compact when the prompt takes more than this many tokens."""
        reserve, _ = self.options.resolved(conv.window.budget)
        return conv.window.budget - reserve

    def triggered(self, conv: Conversation, checkpoint: Checkpoint | None) -> bool:
        return conv.forwarded_tokens(checkpoint) > self.trigger(conv)

    def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None:
        if not self.triggered(conv, checkpoint):
            return None
        start = range_start(conv, checkpoint)
        _, keep = self.options.resolved(conv.window.budget)
        cut = find_cut_point(conv, start, keep)
        if cut is None:
            return None
        cut, split = turn_cut(conv, start, cut, self.trigger(conv))
        # A split turn's start is summarised apart, rarely longer than the start itself.
        prefix = 0 if split is None else min(conv.summary_budget, conv.tokens_between(split, cut))
        after = conv.tokens_with_cut(cut, conv.summary_allowance(conv.summary_budget + prefix))
        if not leaves_room(conv, checkpoint, after, self.trigger(conv)):
            return None
        covered = extract_file_ops(conv.messages[start:cut])
        return Plan(
            start=start,
            end=cut,
            reason="threshold",
            merge=True,
            turn_start=split,
            state=carried_file_ops(previous_file_ops(checkpoint), covered),
        )


STRATEGY = CutPoint

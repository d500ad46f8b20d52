"""``rounds`` (note 002): an A/B window of rounds; the oldest B rounds become a Session Memory block.

A round is a user message and everything up to the next user message: assistant replies, tool
calls and their results, even system messages in between. Non-head messages before the first
user message (an assistant greeting, say) belong to the first round. The newest user message
opens the last round.

Rounds are counted from where the raw history begins: the checkpoint's ``end``, or ``conv.head``
with no checkpoint. With A = ``full_context_turns`` and B = ``cached_context_turns``, when the
uncompressed rounds number at least A + B, the plan compresses exactly the oldest B of them::

    [head] [Session 1..B] [Session B+1..2B] ... | [uncompressed rounds ...] [current user]
                                                  ^ checkpoint.end (a user message)

- ``start`` is where the raw history begins; ``end`` is the first message of the round after
  those B, always a user message, hence a valid cut; at least A rounds (including the newest
  user message) stay raw, so the last message is never covered.
- ``merge=False``: each compression becomes one more block after the existing ones, oldest
  first, with a budget of ``block_ratio`` of the tokens it covers (at least ``min_block_tokens``).
  Each block is forwarded as a message of its own (``SessionMemoryKind.messages``), so the
  blocks already sent keep their bytes.
- Bounded memory (not in the note, which assumes a large window): when Session Memory plus the
  new block would pass ``memory_ratio`` of the window, the blocks and the new rounds are folded
  into one block (``merge=True``, reason ``fold``), bounded by the tenant's summary budget.
- ``state["rounds_through"]`` is how many rounds are compressed so far (the note's
  ``compressedThrough``). It is derivable from the messages, and is derived when a checkpoint
  lacks it (one written by another strategy), but it is stored so no one has to.

A request may set A and B for itself, as the note's request body may: ``X-Ctx-Rounds-Full`` and
``X-Ctx-Rounds-Cached``, whole numbers from 1 to ``MAX_REQUEST_TURNS`` (``RoundsOptions.request_overrides``).

One compression per request, as in the note: a client that arrives with 20 uncompressed rounds
gets B of them compressed, the next request the next B, and so on. With ``catch_up = true`` one
compression instead covers the largest multiple of B rounds that leaves at least A raw.

Defaults by ``optimise`` (``RoundsOptions.batch``, ``catches_up``): with ``"tokens"`` the note's
B = 3 and no catch-up. With ``"cost"`` B = ``COST_CACHED_TURNS`` (10) and catch-up on: each
compression breaks the provider's prompt cache from the new block on, so the rounds between
two compressions are more (a compression every 10 turns instead of every 3; about the cheapest
for A = 4 when a cached token costs a tenth), and a client that arrives with many rounds gets
them compressed at once rather than one batch per request.

Rounds are not tokens: A + B rounds of an agent's tool results can overflow any window. So one
more rule, ``tokens`` (not in the note, in either mode): when the prompt reaches
``hysteresis.HIGH_WATER`` of the budget, the oldest rounds are compressed — as few as bring the
prompt (counting the new block at its budget) to the low-water mark (``hysteresis.low_water``), keeping at
least the newest round, fewer than A if they must — unless the count rule compresses more. When
even the newest round alone is over the mark (an agent's turn of several large tool results in a
small window), the start of it is compressed too, up to a valid cut (never between a tool call
and its results); what is left of it is the first round from then on. With ``"cost"`` it waits
while the prompt fits if it would leave no room before the next (``hysteresis.leaves_room``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import Field, PositiveInt

from ctxproxy.strategies.base import (
    Block,
    Checkpoint,
    Conversation,
    Message,
    Optimise,
    Plan,
    RequestOverride,
    StrategyOptions,
)
from ctxproxy.strategies.boundaries import user_indices
from ctxproxy.strategies.hysteresis import HIGH_WATER, cut_to, leaves_room, low_water, share
from ctxproxy.strategies.kinds import BlockKind
from ctxproxy.strategies.traits import StrategyTraits

SESSION_MEMORY_HEADER = "## Session Memory"


class SessionMemoryKind(BlockKind):
    """Session Memory blocks, one section per block, oldest first, each section a message of its
    own (the first under the header): a compression appends one, and the messages before it keep
    their bytes (only a fold, which rewrites the blocks, changes them)."""

    def render(self, blocks: Sequence[Block]) -> str | None:
        return "\n\n".join(self.messages(blocks) or [SESSION_MEMORY_HEADER])

    def messages(self, blocks: Sequence[Block]) -> list[str] | None:
        sections = [f"### Messages {b.start + 1}-{b.end}\n\n{b.text.strip()}" for b in blocks]
        if not sections:
            return None
        return [f"{SESSION_MEMORY_HEADER}\n\n{sections[0]}", *sections[1:]]


ROUNDS = SessionMemoryKind("rounds")


MAX_REQUEST_TURNS = 100  # the largest A or B a request may ask for
NOTE_CACHED_TURNS = 3  # the note's B, the default with optimise = "tokens"
COST_CACHED_TURNS = 10  # B with optimise = "cost" (module docstring)
BLOCK_HEADING_TOKENS = 16  # a Session Memory block's "### Messages i-j" heading and separators, at most


class RoundsOptions(StrategyOptions):
    # The note's per-request fullContextTurns / cachedContextTurns, as headers.
    request_overrides: ClassVar[tuple[RequestOverride, ...]] = (
        RequestOverride("X-Ctx-Rounds-Full", "full_context_turns", 1, MAX_REQUEST_TURNS),
        RequestOverride("X-Ctx-Rounds-Cached", "cached_context_turns", 1, MAX_REQUEST_TURNS),
    )
    full_context_turns: PositiveInt = 4  # A: rounds that always stay raw after a compression
    cached_context_turns: PositiveInt | None = None  # B: rounds compressed together into one block (``batch``)
    catch_up: bool | None = None  # compress every whole batch of B at once instead of one per request
    block_ratio: float = Field(0.25, gt=0, le=1)  # a block's budget: this share of the tokens it covers
    min_block_tokens: PositiveInt = 64
    memory_ratio: float = Field(0.3, gt=0, lt=1)  # Session Memory's share of the window before folding

    def batch(self, optimise: Optimise) -> int:
        """B: ``cached_context_turns``, or unset, 3 (tokens) or 10 (cost)."""
        if self.cached_context_turns is not None:
            return self.cached_context_turns
        return NOTE_CACHED_TURNS if optimise == "tokens" else COST_CACHED_TURNS

    def catches_up(self, optimise: Optimise) -> bool:
        """``catch_up``, or unset, off (tokens) or on (cost)."""
        return self.catch_up if self.catch_up is not None else optimise == "cost"

    def block_budget(self, covered: int) -> int:
        """A Session Memory block's budget for rounds of ``covered`` tokens."""
        return max(self.min_block_tokens, int(covered * self.block_ratio))

    def crowding(self, blank: Conversation) -> str | None:
        if self.batch(blank.optimise) == 1:
            return "it compresses a round on every turn: raise cached_context_turns (or leave it unset)"
        return None


def round_starts(messages: Sequence[Message], start: int) -> list[int]:
    """First index of each round in ``messages[start:]``.

    The first round begins at ``start`` and runs to the second user message at or after it, so
    whatever precedes the first user message (a greeting) belongs to the first round.
    """
    if start >= len(messages):
        return []
    return [start, *user_indices(messages, start)[1:]]


def rounds_to_compress(uncompressed: int, options: RoundsOptions, optimise: Optimise = "tokens") -> int:
    """How many of the oldest uncompressed rounds to compress now (0: none)."""
    full, cached = options.full_context_turns, options.batch(optimise)
    if uncompressed < full + cached:
        return 0
    if not options.catches_up(optimise):
        return cached
    return (uncompressed - full) // cached * cached


def rounds_through(conv: Conversation, checkpoint: Checkpoint | None) -> int:
    """Rounds compressed so far: the checkpoint's stored count, else counted in ``[head, end)``."""
    if checkpoint is None:
        return 0
    stored = _stored_count(checkpoint.state)
    if stored is not None:
        return stored
    return len(round_starts(conv.messages[: checkpoint.end], conv.head))


def _stored_count(state: Mapping[str, Any]) -> int | None:
    value = state.get("rounds_through")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


class Rounds:
    name: ClassVar[str] = "rounds"
    options_model: ClassVar[type[StrategyOptions]] = RoundsOptions
    # Note 002 ships layered memory: User and Scope Memory each round, Session Memory at compression.
    traits: ClassVar[StrategyTraits] = StrategyTraits(
        block_kinds=(ROUNDS,), memory_by_default=True, layered_memory=True
    )

    def __init__(self, options: StrategyOptions) -> None:
        if not isinstance(options, RoundsOptions):
            raise TypeError(f"{self.name} needs RoundsOptions, got {type(options).__name__}")
        self.options = options

    def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None:
        start = conv.head if checkpoint is None else max(checkpoint.end, conv.head)
        starts = round_starts(conv.messages, start)
        count = rounds_to_compress(len(starts), self.options, conv.optimise)
        reason = "rounds" if count == self.options.batch(conv.optimise) else "catch_up"
        end = starts[count] if count else start
        by_tokens = self._tokens_end(conv, checkpoint, starts)
        if by_tokens > end:
            end, reason = by_tokens, "tokens"
        if end == start:
            return None
        # A round is counted once compressed whole (a cut inside the newest leaves it counted later).
        state = {"rounds_through": rounds_through(conv, checkpoint) + sum(1 for s in starts[1:] if s <= end)}
        budget = self.options.block_budget(conv.tokens_between(start, end))
        if self._folds(conv, budget):
            # Session Memory would outgrow its share of the window: fold the blocks and the new
            # rounds into one block, within the request's summary budget.
            return Plan(start, end, "fold", merge=True, state=state, block_kind=ROUNDS.name)
        return Plan(start, end, reason, merge=False, state=state, block_kind=ROUNDS.name, max_tokens=budget)

    def _folds(self, conv: Conversation, budget: int) -> bool:
        return conv.summary_tokens + budget > self.options.memory_ratio * conv.window.budget

    def _tokens_end(self, conv: Conversation, checkpoint: Checkpoint | None, starts: Sequence[int]) -> int:
        """The ``tokens`` rule: where the compressed rounds end (``starts[0]``: none)."""
        high = share(conv, HIGH_WATER)
        if not starts or conv.forwarded_tokens(checkpoint) < high:
            return starts[0] if starts else conv.total
        low = low_water(conv)
        end, after = starts[0], 0
        for end in starts[1:]:  # the newest round always stays raw...
            after = conv.tokens_with_cut(end, self._memory_after(conv, starts[0], end))
            if after <= low:
                break
        else:  # ...unless even it alone is over the mark: compress its start too, at a valid cut
            inside = cut_to(conv, end, low, self._memory_after(conv, starts[0], conv.total), conv.total - 1)
            if inside is not None and inside > end:
                end, after = inside, conv.tokens_with_cut(inside, self._memory_after(conv, starts[0], inside))
        return end if leaves_room(conv, checkpoint, after, high) else starts[0]

    def _memory_after(self, conv: Conversation, start: int, end: int) -> int:
        """Session Memory's tokens, at most, once ``[start, end)`` is compressed into it."""
        budget = self.options.block_budget(conv.tokens_between(start, end))
        if self._folds(conv, budget):
            return conv.summary_allowance(conv.summary_budget)
        if conv.summary_tokens == 0:
            return conv.summary_allowance(budget + BLOCK_HEADING_TOKENS)
        return conv.summary_tokens + budget + BLOCK_HEADING_TOKENS


STRATEGY = Rounds

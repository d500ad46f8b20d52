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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import Field, PositiveInt

from ctxproxy.strategies.base import Block, Checkpoint, Conversation, Message, Plan, RequestOverride, StrategyOptions
from ctxproxy.strategies.boundaries import user_indices
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


class RoundsOptions(StrategyOptions):
    # The note's per-request fullContextTurns / cachedContextTurns, as headers.
    request_overrides: ClassVar[tuple[RequestOverride, ...]] = (
        RequestOverride("X-Ctx-Rounds-Full", "full_context_turns", 1, MAX_REQUEST_TURNS),
        RequestOverride("X-Ctx-Rounds-Cached", "cached_context_turns", 1, MAX_REQUEST_TURNS),
    )
    full_context_turns: PositiveInt = 4  # A: rounds that always stay raw after a compression
    cached_context_turns: PositiveInt = 3  # B: rounds compressed together into one block
    catch_up: bool = False  # compress every whole batch of B at once instead of one per request
    block_ratio: float = Field(0.25, gt=0, le=1)  # a block's budget: this share of the tokens it covers
    min_block_tokens: PositiveInt = 64
    memory_ratio: float = Field(0.3, gt=0, lt=1)  # Session Memory's share of the window before folding


def round_starts(messages: Sequence[Message], start: int) -> list[int]:
    """First index of each round in ``messages[start:]``.

    The first round begins at ``start`` and runs to the second user message at or after it, so
    whatever precedes the first user message (a greeting) belongs to the first round.
    """
    if start >= len(messages):
        return []
    return [start, *user_indices(messages, start)[1:]]


def rounds_to_compress(uncompressed: int, options: RoundsOptions) -> int:
    """How many of the oldest uncompressed rounds to compress now (0: none)."""
    full, cached = options.full_context_turns, options.cached_context_turns
    if uncompressed < full + cached:
        return 0
    if not options.catch_up:
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
        count = rounds_to_compress(len(starts), self.options)
        if count == 0:
            return None
        reason = "rounds" if count == self.options.cached_context_turns else "catch_up"
        state = {"rounds_through": rounds_through(conv, checkpoint) + count}
        end = starts[count]
        covered = conv.tokens_between(start, end)
        budget = max(self.options.min_block_tokens, int(covered * self.options.block_ratio))
        if conv.summary_tokens + budget > self.options.memory_ratio * conv.window.budget:
            # Session Memory would outgrow its share of the window: fold the blocks and the new
            # rounds into one block, bounded by the tenant's summary budget.
            return Plan(start, end, "fold", merge=True, state=state, block_kind=ROUNDS.name)
        return Plan(start, end, reason, merge=False, state=state, block_kind=ROUNDS.name, max_tokens=budget)


STRATEGY = Rounds

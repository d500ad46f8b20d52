"""``sample_every``: summarise everything but the newest ``keep`` messages once ``every`` new
ones have gathered since the last summary. Its summaries are blocks of its own kind, rendered
under a header of its own.

``sample_crashing``: the same, but its plan raises for a conversation that asks it to, and its
block kind cannot render."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

from pydantic import PositiveInt

from ctxproxy.strategies.base import Block, Checkpoint, Conversation, Plan, StrategyOptions
from ctxproxy.strategies.boundaries import valid_cut_at_or_before
from ctxproxy.strategies.kinds import BlockKind
from ctxproxy.strategies.traits import StrategyTraits

HEADER = "## Sample summary"


class EveryOptions(StrategyOptions):
    every: PositiveInt = 6
    keep: PositiveInt = 2


class SampleKind(BlockKind):
    def render(self, blocks: Sequence[Block]) -> str | None:
        return "\n\n".join([HEADER, *(block.text.strip() for block in blocks)])


KIND = SampleKind("sample_every", message_name="sample_summary")


class EveryFewMessages:
    name: ClassVar[str] = "sample_every"
    options_model: ClassVar[type[StrategyOptions]] = EveryOptions
    traits = StrategyTraits(block_kinds=(KIND,))

    def __init__(self, options: StrategyOptions) -> None:
        assert isinstance(options, EveryOptions)
        self.options = options

    def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None:
        start = conv.head if checkpoint is None else max(checkpoint.end, conv.head)
        end = conv.total - self.options.keep
        if end - start < self.options.every:
            return None
        cut = valid_cut_at_or_before(conv.messages, end, floor=start)
        if cut is None:
            return None
        return Plan(start=start, end=cut, reason="every", merge=True, block_kind=KIND.name)


CRASH = "please crash the sample plan"


class CrashingKind(BlockKind):
    def render(self, blocks: Sequence[Block]) -> str | None:
        raise LookupError("the sample kind cannot render")


class Crashing(EveryFewMessages):
    name: ClassVar[str] = "sample_crashing"
    traits = StrategyTraits(block_kinds=(CrashingKind("sample_crashing"),))

    def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None:
        if any(CRASH in str(message.get("content")) for message in conv.messages):
            raise ZeroDivisionError(CRASH)
        made = super().plan(conv, checkpoint, now)
        return None if made is None else replace(made, block_kind="sample_crashing")

"""``none``: forward as is. Sessions are still identified, counted and recorded.

A prompt that does not fit the window is still compacted (the engine's emergency plan), and a
checkpoint made so is used only for prompts that do not fit: see ``StrategyTraits.compacts_only_to_fit``.
A fork gets no branch summary (``StrategyTraits.summarises_branches``): nothing is added either."""

from __future__ import annotations

from typing import ClassVar

from ctxproxy.strategies.base import Checkpoint, Conversation, Plan, StrategyOptions
from ctxproxy.strategies.traits import StrategyTraits


class NoneOptions(StrategyOptions):
    pass


class NoCompaction:
    name: ClassVar[str] = "none"
    options_model: ClassVar[type[StrategyOptions]] = NoneOptions
    # The promise is the client's bytes: an (emergency) checkpoint only for a prompt that does not fit.
    traits: ClassVar[StrategyTraits] = StrategyTraits(compacts_only_to_fit=True, summarises_branches=False)

    def __init__(self, options: StrategyOptions) -> None:
        self.options = options

    def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None:
        return None


STRATEGY = NoCompaction

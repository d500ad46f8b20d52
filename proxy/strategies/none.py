"""``none``: forward as is. Sessions are still identified, counted and recorded."""

from __future__ import annotations

from typing import ClassVar

from proxy.strategies.base import Checkpoint, Conversation, Plan, StrategyOptions


class NoneOptions(StrategyOptions):
    pass


class NoCompaction:
    name: ClassVar[str] = "none"
    options_model: ClassVar[type[StrategyOptions]] = NoneOptions

    def __init__(self, options: StrategyOptions) -> None:
        self.options = options

    def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None:
        return None


STRATEGY = NoCompaction

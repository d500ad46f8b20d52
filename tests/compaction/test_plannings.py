"""A built-in strategy's planning is built once per options object and reused; a plugin's is
built anew each request (it may keep state); each plans as ``Planning.of`` would."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from ctxproxy.compaction import engine
from ctxproxy.compaction.engine import Plannings
from ctxproxy.compaction.prepare import Planning
from ctxproxy.config.models import CompactionConfig
from ctxproxy.strategies.base import Checkpoint, Conversation, Plan, StrategyOptions
from ctxproxy.strategies.registry import builtin_registry


def _config(registry: Any, strategy: str, **options: Any) -> CompactionConfig:
    return CompactionConfig(strategy=strategy, options={strategy: registry.options(strategy, options)})


@pytest.mark.parametrize("strategy", sorted(builtin_registry()))
def test_a_builtin_strategy_is_built_once_per_options(strategy: str) -> None:
    registry = builtin_registry()
    plannings = Plannings(registry)
    config = _config(registry, strategy)
    first = plannings.of(config)
    assert plannings.of(config) is first
    slow = Planning.of(registry, config)
    assert type(first.strategy) is type(slow.strategy) and vars(first.kinds) == vars(slow.kinds)
    assert first.strategy is not None and slow.strategy is not None
    assert vars(first.strategy)["options"] is config.options[strategy] and (first.always, first.recovery) == (
        False,
        False,
    )
    assert (first.compacts_only_to_fit, first.summarises_branches) == (
        slow.compacts_only_to_fit,
        slow.summarises_branches,
    )
    other = _config(registry, strategy)  # equal options, another object (a request's override)
    assert plannings.of(other) is not first
    assert vars(plannings.of(other).strategy)["options"] is other.options[strategy]


class _Counting:
    """A plugin's strategy that keeps state of its own."""

    name: ClassVar[str] = "counting"
    options_model: ClassVar[type[StrategyOptions]] = StrategyOptions

    def __init__(self, options: StrategyOptions) -> None:
        self.options = options
        self.planned = 0

    def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None:
        self.planned += 1
        return None


def test_a_plugin_strategy_is_built_anew_each_time() -> None:
    registry = builtin_registry()
    registry.register(_Counting)
    plannings = Plannings(registry)
    config = _config(registry, "counting")
    assert plannings.of(config).strategy is not plannings.of(config).strategy


def test_the_held_plannings_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "PLANNINGS", 2)
    registry = builtin_registry()
    plannings = Plannings(registry)
    configs = [_config(registry, "none") for _ in range(3)]
    made = [plannings.of(config) for config in configs]
    assert plannings.of(configs[2]) is made[2]  # the newest kept after the others were let go
    assert plannings.of(configs[0]) is not made[0]

"""The strategy registry: built-in and external strategies register the same way.

A strategy is a class with a ``name``, an ``options_model`` (a ``StrategyOptions``
subclass), a pure ``plan`` and, optionally, ``traits`` (``ctxproxy.strategies.traits``): the
block kinds it writes, with their renderers and executors, which the registry collects into
``kinds`` (with the branch summary's, which every strategy that summarises branches writes).
Built-ins are registered by ``builtin_registry()``; a plugin's strategies (the
``ctxproxy.strategies`` entry-point group) are registered the same way into that registry by
``ctxproxy.plugins.loading``, which the app and ``config check`` run once at start.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ctxproxy.strategies.base import Strategy, StrategyOptions
from ctxproxy.strategies.branch import BRANCH_SUMMARY
from ctxproxy.strategies.kinds import BlockKind, BlockKinds
from ctxproxy.strategies.traits import traits_of


class StrategyRegistry(Mapping[str, type[Strategy]]):
    def __init__(self) -> None:
        self._classes: dict[str, type[Strategy]] = {}
        self._kinds: dict[str, BlockKind] = {}

    def register(self, cls: type[Strategy]) -> type[Strategy]:
        if cls.name in self._classes and self._classes[cls.name] is not cls:
            raise ValueError(f"strategy {cls.name!r} is already registered")
        declared = traits_of(cls).block_kinds
        known = self.kinds
        for kind in declared:
            if kind.name in known and known[kind.name] != kind:
                raise ValueError(f"block kind {kind.name!r} of strategy {cls.name!r} is already registered")
        self._classes[cls.name] = cls
        self._kinds.update((kind.name, kind) for kind in declared)
        return cls

    @property
    def kinds(self) -> BlockKinds:
        """Every block kind the registered strategies write, the summary kinds and the branch summary's."""
        return BlockKinds([BRANCH_SUMMARY, *self._kinds.values()])

    def __getitem__(self, name: str) -> type[Strategy]:
        return self._classes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._classes))

    def __len__(self) -> int:
        return len(self._classes)

    def options(self, name: str, raw: Mapping[str, Any] | None) -> StrategyOptions:
        """Validate a tenant's ``[compaction.<name>]`` table; raises pydantic's ValidationError."""
        return self._classes[name].options_model.model_validate(dict(raw or {}))

    def build(self, name: str, options: StrategyOptions) -> Strategy:
        return self._classes[name](options)


def builtin_registry() -> StrategyRegistry:
    from ctxproxy.strategies import cut_point, none, paged, rolling_summary, rounds, sliding_window

    registry = StrategyRegistry()
    for module in (none, sliding_window, rolling_summary, rounds, cut_point, paged):
        registry.register(module.STRATEGY)
    return registry

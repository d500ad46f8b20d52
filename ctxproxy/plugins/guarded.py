"""A plugin's strategy, held so that its failures cost a request nothing.

``guarded_strategy`` wraps a plugin's strategy class in one with the same name, options model and
traits. Its ``plan`` is the plugin's when that returns None or a ``Plan`` whose range lies inside
the conversation (``head <= start <= end < total``); when the plugin's constructor or ``plan``
raises, or the plan is out of range, it is None — the request is forwarded with the checkpoint
the session has, and the emergency plan still compacts a prompt that would not fit — and
``plugin.plan_failed`` is logged (plugin, error type). ``plan`` is pure and runs on the event loop
with every request, so it cannot be given a deadline: it must be quick.

The block kinds the strategy declares are wrapped too: a ``render``, ``section`` or
``name_tools`` that raises (or answers something that is not text) falls back to the common
layout (``BlockKind``'s own), with ``plugin.kind_failed`` logged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

import structlog

from ctxproxy.strategies.base import Block, Checkpoint, Conversation, Plan, Strategy, StrategyOptions
from ctxproxy.strategies.kinds import BlockKind
from ctxproxy.strategies.traits import traits_of

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class GuardedKind(BlockKind):
    """A plugin's block kind (``inner``), its text-making methods isolated."""

    inner: BlockKind | None = None
    plugin: str = ""

    def render(self, blocks: Sequence[Block]) -> str | None:
        ok, made = self._call("render", blocks, optional=True)
        return made if ok else None

    def section(self, block: Block) -> str:
        ok, made = self._call("section", block)
        return made if ok else super().section(block)

    def name_tools(self, text: str, recall: str | None, search: str | None) -> str:
        ok, made = self._call("name_tools", text, recall, search)
        return made if ok else text

    def _call(self, method: str, *args: Any, optional: bool = False) -> tuple[bool, Any]:
        """Whether the plugin answered text (or None, when ``optional``), and its answer."""
        try:
            made = getattr(self.inner, method)(*args)
        except Exception as exc:
            error = type(exc).__name__
        else:
            if isinstance(made, str) or (optional and made is None):
                return True, made
            error = "bad_answer"
        log.warning("plugin.kind_failed", plugin=self.plugin, kind=self.name, method=method, error=error)
        return False, None


def guarded_kind(kind: BlockKind, plugin: str) -> GuardedKind:
    declared = {f.name: getattr(kind, f.name) for f in fields(BlockKind)}
    return GuardedKind(**declared, inner=kind, plugin=plugin)


def guarded_strategy(cls: type[Strategy]) -> type[Strategy]:
    """``cls`` as the registry keeps it (module docstring)."""
    plugin = cls.name
    declared = traits_of(cls)
    guarded_traits = replace(declared, block_kinds=tuple(guarded_kind(k, plugin) for k in declared.block_kinds))

    class Guarded:
        name: ClassVar[str] = plugin
        options_model: ClassVar[type[StrategyOptions]] = cls.options_model
        traits = guarded_traits

        def __init__(self, options: StrategyOptions) -> None:
            try:
                self._inner: Strategy | None = cls(options)
            except Exception as exc:
                log.warning("plugin.plan_failed", plugin=plugin, error=type(exc).__name__)
                self._inner = None

        def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None:
            if self._inner is None:
                return None
            try:
                made = self._inner.plan(conv, checkpoint, now)
            except Exception as exc:
                log.warning("plugin.plan_failed", plugin=plugin, error=type(exc).__name__)
                return None
            if made is None or (isinstance(made, Plan) and conv.head <= made.start <= made.end < conv.total):
                return made
            log.warning("plugin.plan_failed", plugin=plugin, error="bad_plan")
            return None

    Guarded.__qualname__ = Guarded.__name__ = f"Guarded[{cls.__qualname__}]"
    return Guarded

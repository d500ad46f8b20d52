"""Running the hooks plugins registered (``ctxproxy.plugins.spec``): each call isolated, with a
deadline (``ctxproxy.plugins.isolation``).

One event's hooks run concurrently, so an event costs at most one ``hook_timeout`` however many
plugins hook it. The events whose answer counts (``before_compact``, ``before_fork``) are waited
for where they happen, often on a request's path: each such wait is logged (``plugin.hooks``: the
hook, its plugins, ``duration_ms``) and added to the request's ``hooks_ms``
(``ctxproxy.stopwatch.plugin_hooks``). ``after_compact``'s answer is ignored, so its caller need
not wait for it (``ctxproxy.compaction.hooks`` runs it in the background). A failed call is
logged once — ``plugin.hook_failed`` with the plugin, the hook and the error's type
(``"timeout"`` with ``timeout_s``) — and counts as no answer. Of the
``before_compact`` (or ``before_fork``) answers, a veto wins over a summary; among equals, the
plugin first by name.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from ctxproxy.plugins.isolation import TIMEOUT, Failed, isolated
from ctxproxy.plugins.spec import CompactedEvent, CompactEvent, Decision, ForkEvent, HookName, UseSummary, Veto
from ctxproxy.stopwatch import plugin_hooks

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Hook:
    """One plugin's function for one event."""

    plugin: str
    call: Callable[..., Any]


@dataclass(frozen=True)
class Decided:
    """The ``before_compact`` (or ``before_fork``) answer that counts, and whose it is."""

    plugin: str
    decision: Decision


class HookRunner:
    """The hooks of the loaded plugins, by event, in plugin-name order."""

    def __init__(self, hooks: Mapping[HookName, Sequence[Hook]] | None = None, timeout: float = 2.0) -> None:
        self._hooks = {name: tuple(sorted(found, key=lambda h: h.plugin)) for name, found in (hooks or {}).items()}
        self.timeout = timeout

    def has(self, name: HookName) -> bool:
        return bool(self._hooks.get(name))

    async def before_compact(self, event: CompactEvent) -> Decided | None:
        """The answer that counts (module docstring), or None: compact as planned."""
        return await self._decide("before_compact", event)

    async def after_compact(self, event: CompactedEvent) -> None:
        await self._run("after_compact", event)

    async def before_fork(self, event: ForkEvent) -> Decided | None:
        """The answer that counts (module docstring), or None: summarise the branch left as planned."""
        return await self._decide("before_fork", event)

    async def _decide(self, name: HookName, event: object) -> Decided | None:
        if not self.has(name):
            return None
        started = time.perf_counter()
        with plugin_hooks():
            answers = await self._run(name, event)
        plugins = [hook.plugin for hook in self._hooks.get(name, ())]
        log.info(
            "plugin.hooks", hook=name, plugins=plugins, duration_ms=round((time.perf_counter() - started) * 1000, 1)
        )
        decided = [Decided(hook.plugin, answer) for hook, answer in answers if _decision(hook, name, answer)]
        vetoes = [d for d in decided if isinstance(d.decision, Veto)]
        chosen = vetoes or decided
        return chosen[0] if chosen else None

    async def _run(self, name: HookName, event: object) -> list[tuple[Hook, Any]]:
        """Each hook's answer, failed calls logged and left out."""
        hooks = self._hooks.get(name, ())
        if not hooks:
            return []
        answers = await asyncio.gather(*(isolated(hook.call, event, timeout=self.timeout) for hook in hooks))
        done = []
        for hook, answer in zip(hooks, answers, strict=True):
            if isinstance(answer, Failed):
                extra = {"timeout_s": self.timeout} if answer.error == TIMEOUT else {}
                log.warning("plugin.hook_failed", plugin=hook.plugin, hook=name, error=answer.error, **extra)
            else:
                done.append((hook, answer))
        return done


def _decision(hook: Hook, name: HookName, answer: Any) -> bool:
    """Whether an answer to hook ``name`` decides something: a ``Veto``, or a ``UseSummary``
    holding text. None (the usual answer) does not; anything else is logged as a failed call."""
    if answer is None:
        return False
    if isinstance(answer, Veto) or (isinstance(answer, UseSummary) and isinstance(answer.text, str)):
        return True
    log.warning("plugin.hook_failed", error="bad_answer", plugin=hook.plugin, hook=name, answer=type(answer).__name__)
    return False

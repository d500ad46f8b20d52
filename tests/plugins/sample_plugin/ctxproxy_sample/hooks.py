"""Hooks. ``SampleHooks`` records what it is told (``EVENTS``, read by the tests), vetoes the
compactions of tenants whose name starts with ``veto`` and supplies the summary for those
starting with ``supply`` (one far over any budget for ``toolong``); at a fork, the same for the
branch summary of tenants starting with ``branchveto``, ``branchsupply`` and ``branchtoolong``.
The others misbehave: they raise, sleep, or answer nonsense."""

from __future__ import annotations

import asyncio
from typing import Any

from ctxproxy.plugins import CompactedEvent, CompactEvent, ForkEvent, UseSummary, Veto

EVENTS: list[tuple[str, Any]] = []
SECRET = "text of a hook's own exception, which ctxproxy must not log"


def supplied(event: CompactEvent) -> str:
    return f"### Key facts\n- supplied by sample_hooks for messages {event.start}-{event.end}"


class SampleHooks:
    async def before_compact(self, event: CompactEvent) -> Veto | UseSummary | None:
        EVENTS.append(("before_compact", event))
        if event.tenant.startswith("veto"):
            return Veto()
        if event.tenant.startswith("supply"):
            return UseSummary(supplied(event))
        if event.tenant.startswith("toolong"):
            return UseSummary(supplied(event) + " and more" * (event.max_tokens * 2))
        return None

    def after_compact(self, event: CompactedEvent) -> None:  # a plain function: run in a worker thread
        EVENTS.append(("after_compact", event))

    async def before_fork(self, event: ForkEvent) -> Veto | UseSummary | None:
        EVENTS.append(("before_fork", event))
        if event.tenant.startswith("branchveto"):
            return Veto()
        if event.tenant.startswith("branchsupply"):
            return UseSummary(branch_supplied(event))
        if event.tenant.startswith("branchtoolong"):
            return UseSummary(branch_supplied(event) + " and more" * (event.max_tokens * 2))
        return None


def branch_supplied(event: ForkEvent) -> str:
    return f"- supplied by sample_hooks for the {len(event.branch)} messages left after message {event.point}"


class RaisingHooks:
    async def before_compact(self, event: CompactEvent) -> None:
        raise RuntimeError(SECRET)

    def after_compact(self, event: CompactedEvent) -> None:
        raise ValueError(SECRET)

    async def before_fork(self, event: ForkEvent) -> None:
        raise RuntimeError(SECRET)


class SleepingHooks:
    """Would veto every compaction and branch summary, if it ever answered in time."""

    async def before_compact(self, event: CompactEvent) -> Veto:
        await asyncio.sleep(3600)
        return Veto()

    async def after_compact(self, event: CompactedEvent) -> None:
        await asyncio.sleep(3600)

    async def before_fork(self, event: ForkEvent) -> Veto:
        await asyncio.sleep(3600)
        return Veto()


class LateHooks:
    """Only observes, and takes its time doing it."""

    async def after_compact(self, event: CompactedEvent) -> None:
        await asyncio.sleep(3600)


class OddHooks:
    async def before_compact(self, event: CompactEvent) -> str:
        return "veto"  # not a Veto: logged and ignored

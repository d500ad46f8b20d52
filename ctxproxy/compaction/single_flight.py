"""Single flight: one compaction per session at a time, across processes and machines.

A compaction holds the session's Store lease (short, ``lease_ttl``, renewed while the compaction
runs). A holder that died frees it: at once where the store can tell (``DiskStore``, same host),
else when its ttl runs out (``RedisStore``: seconds). The lease's fencing token goes with the
checkpoint it makes, so one that hung past its lease and was taken over saves nothing
(``ctxproxy.compaction.checkpoints.fenced_out``). Nothing here knows which store it runs on. A request
whose plan finds the lease taken records itself as *pending* (its messages, in the Store) and goes
on with the newest checkpoint — unless that would not fit the window (``wait``), in which case it
waits for the lease, at most ``summary_timeout``, then re-plans on the newest checkpoint and, if
that still does not fit, compacts without the lease. When a run ends, the pending request is
re-planned once against the new checkpoint and, if it still needs it, compacted. So N concurrent
triggers of one session cost at most two summaries.

A failing store never stops a compaction: without a lease to take there is no single flight to
keep. Any other failure is logged (``compaction.failed``) and costs the request its compaction,
never the request itself.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog

from ctxproxy.background import BackgroundTasks
from ctxproxy.compaction.inputs import CompactionInput
from ctxproxy.compaction.prepare import Planning, plan_compaction
from ctxproxy.compaction.runner import Runner
from ctxproxy.compaction.views import SessionViews
from ctxproxy.config.models import CompactionConfig
from ctxproxy.session import PrefixChain
from ctxproxy.store import Store, StoreError, StoreLock, warn_store_failure
from ctxproxy.store.keys import compaction_lock_key, compaction_pending_key
from ctxproxy.store.lease import renewed
from ctxproxy.strategies.base import Checkpoint, Plan, Window
from ctxproxy.strategies.boundaries import leading_system_count
from ctxproxy.strategies.registry import StrategyRegistry
from ctxproxy.tokens import TokenCounter

log = structlog.get_logger(__name__)
PENDING_RERUNS = 3
LEASE_MIN, LEASE_MAX = 1.0, 10.0  # seconds

Made = tuple[Checkpoint | None, bool]  # the checkpoint to forward with, and whether this call made it


def lease_ttl(config: CompactionConfig) -> float:
    """A compaction's lease: a quarter of ``summary_timeout``, between 1 and 10 s. Renewed every
    third of that while the compaction runs, so it only runs out when its holder is gone or hung."""
    return min(LEASE_MAX, max(LEASE_MIN, config.summary_timeout / 4))


class SingleFlight:
    def __init__(
        self,
        store: Store,
        tasks: BackgroundTasks,
        counter: TokenCounter,
        views: SessionViews,
        runner: Runner,
        registry: StrategyRegistry,
    ) -> None:
        self._store = store
        self._tasks = tasks
        self._counter = counter
        self._views = views
        self._runner = runner
        self._registry = registry

    async def compact_shielded(
        self, req: CompactionInput, planning: Planning, plan: Plan, current: Checkpoint | None, *, wait: bool
    ) -> Made:
        # Shielded: a client that goes away does not waste a summary half made.
        task = self._tasks.spawn(self.compact(req, planning, plan, current, wait=wait), name="compaction")
        return await asyncio.shield(task)

    async def compact(
        self, req: CompactionInput, planning: Planning, plan: Plan, current: Checkpoint | None, *, wait: bool
    ) -> Made:
        """Run ``plan`` under the session's lease (module docstring); ``planning`` re-plans it
        when another compaction of the session made something newer meanwhile."""
        try:
            return await self._single_flight(req, planning, plan, current, wait=wait)
        except StoreError as exc:  # a write the plan itself needs (``paged``'s pages, say)
            warn_store_failure(log, exc, "compaction.store_unavailable", session=req.key.value, error=str(exc))
        except Exception:
            log.exception("compaction.failed", session=req.key.value)
        return None, False

    async def _single_flight(
        self, req: CompactionInput, planning: Planning, plan: Plan, current: Checkpoint | None, *, wait: bool
    ) -> Made:
        config = req.tenant.compaction
        lease = self._store.lock(compaction_lock_key(req.key), ttl=lease_ttl(config))
        taken = await self._acquire(req, lease, blocking=False)
        if taken is False:
            await self._mark_pending(req)
            self._tasks.spawn(self.drain_pending(req), name="compaction.pending")
            if not wait:
                return None, False
            taken = await self._acquire(req, lease, blocking=True, timeout=config.summary_timeout)
            # Whoever held the lease may have made what we need: plan again on fresh state.
            current = (await self._views.load(req.key)).best(req.chain)
            head = leading_system_count(req.messages)
            replanned = plan_compaction(self._views.conversation(req, head, current), current, planning, time.time())
            if replanned is None:
                if taken:
                    await self._release(req, lease)
                return current, False
            plan = replanned
            if taken is False:
                log.warning("compaction.lease_wait_timeout", session=req.key.value, waited_s=config.summary_timeout)
        kind = planning.kind_of(plan)
        if not taken:  # waited long enough, or the store fails: compact without the lease
            return await self._runner.run(req, plan, current, kind), True
        try:
            async with renewed(lease):
                made = await self._runner.run(req, plan, current, kind, lease.fence)
        finally:
            await self._release(req, lease)
        self._tasks.spawn(self.drain_pending(req), name="compaction.pending")
        return made, True

    async def _acquire(
        self, req: CompactionInput, lease: StoreLock, *, blocking: bool, timeout: float | None = None
    ) -> bool | None:
        """Whether the lease was taken; ``None`` when the store failed (logged)."""
        try:
            return await lease.acquire(blocking=blocking, timeout=timeout)
        except StoreError as exc:
            warn_store_failure(log, exc, "compaction.store_unavailable", session=req.key.value, error=str(exc))
            return None

    async def _release(self, req: CompactionInput, lease: StoreLock) -> None:
        """A release the store refused leaves the lease to be taken over (this process knows it
        abandoned it) or to expire; it never fails the compaction."""
        try:
            await lease.release()
        except StoreError as exc:
            warn_store_failure(log, exc, "compaction.store_unavailable", session=req.key.value, error=str(exc))

    async def _mark_pending(self, req: CompactionInput) -> None:
        payload: dict[str, Any] = {
            "messages": list(req.messages),
            "model": req.model,
            "window": [req.window.context_window, req.window.reserve_output],
            "user": req.user,
            "scope": req.scope,
            "caller": req.summary_caller,
            "at": time.time(),
        }
        try:
            await self._store.put(compaction_pending_key(req.key), payload, ttl=3600)
        except StoreError as exc:
            warn_store_failure(log, exc, "compaction.store_unavailable", session=req.key.value, error=str(exc))

    async def drain_pending(self, req: CompactionInput) -> None:
        """Re-run the newest pending request of the session once the lock is free."""
        lease = self._store.lock(compaction_lock_key(req.key), ttl=lease_ttl(req.tenant.compaction))
        try:
            # Taking the lease with nothing pending would turn the session's next request away.
            pending_key = compaction_pending_key(req.key)
            if await self._store.get(pending_key) is None or not await lease.acquire(blocking=False):
                return  # nothing to do, or the holder drains when it finishes
            try:
                async with renewed(lease):
                    for _ in range(PENDING_RERUNS):
                        pending = await self._store.get(compaction_pending_key(req.key))
                        if not isinstance(pending, dict) or pending.get("caller") != req.summary_caller:
                            # Nothing pending, or another client's: it is re-run by a request of its
                            # own caller, never summarised upstream under this request's key.
                            return
                        if not await self._store.compare_and_set(compaction_pending_key(req.key), pending, None):
                            continue
                        # The tenant's own planning: a pending request is re-planned as any request
                        # is, even when the run that left it pending was an overflow recovery.
                        planning = Planning.of(self._registry, req.tenant.compaction)
                        await self._rerun(req, planning, pending, lease.fence)
            finally:
                await self._release(req, lease)
        except StoreError as exc:
            warn_store_failure(log, exc, "compaction.store_unavailable", session=req.key.value, error=str(exc))

    async def _rerun(
        self, req: CompactionInput, planning: Planning, pending: dict[str, Any], fence: int | None
    ) -> None:
        messages = pending.get("messages")
        if not isinstance(messages, list) or not messages:
            return
        chain = PrefixChain.of(messages)
        model = pending.get("model") if isinstance(pending.get("model"), str) else None
        tokens = self._counter.count_each(messages, chain.digests, model)
        window = Window(*[int(v) for v in pending.get("window", [req.window.context_window, 0])])
        user, scope = (v if isinstance(v, str) else None for v in (pending.get("user"), pending.get("scope")))
        again = req._replace(
            messages=messages, chain=chain, tokens=tokens, model=model, window=window, user=user, scope=scope
        )
        head = leading_system_count(messages)
        current = (await self._views.load(req.key)).best(chain)
        plan = plan_compaction(self._views.conversation(again, head, current), current, planning, time.time())
        if plan is not None:
            await self._runner.run(again, plan, current, planning.kind_of(plan), fence)

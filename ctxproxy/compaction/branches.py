"""Branch summaries on the request path (note 003, ``ctxproxy.strategies.branch``): which ones a
request gets, and making one when the request forks.

``for_request``: the branch summaries stored for the branch the request is on, and, when the
request forks (``ctxproxy.session.fork``: from the session's previous request as this process
saw it, else from the stored checkpoint chain) and the branch it left holds something worth
keeping (``plan_branch_summary``), a new one — made once per fork: under the session's branch
lease (across processes; whoever gets it second finds the summary made and uses it), by the
branch kind's executor with the tenant's summariser, and saved in the session's index with the
lease's fencing token (``ctxproxy.compaction.checkpoints``: one that lost its lease on the way
saves nothing, ``branch_summary.fenced``). With ``mode = "inline"`` the request waits for it (for
the lease at most ``summary_timeout``, then it is made without); with ``"background"`` it is made
off the request path and the following requests of the new branch get it. Nothing at all for a
strategy that does not summarise branches (``none``) or with ``branch_summary_max_tokens = 0``.

Plugins (``ctxproxy.compaction.hooks.ForkWatch``): every fork is told to the ``before_fork``
hooks — whatever the strategy — once the plan is made; a veto stops the branch summary
(``branch_summary.vetoed``), a summary supplied within the budget is stored as it.

A failure is logged (``branch_summary.failed``, ``branch_summary.store_unavailable``) and costs
the request its branch summary, never the request; a summary that cannot be saved is still
forwarded with this request. One ``branch_summary`` log line per summary made.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial

import structlog

from ctxproxy.background import BackgroundTasks
from ctxproxy.compaction.checkpoints import BRANCHES, SessionIndex, save_fenced
from ctxproxy.compaction.hooks import ForkWatch, SuppliedSummary, Vetoed
from ctxproxy.compaction.inputs import CompactionInput
from ctxproxy.compaction.runner import Runner
from ctxproxy.compaction.single_flight import lease_ttl
from ctxproxy.compaction.views import SessionViews
from ctxproxy.session.fork import Fork, detect_fork, required_shared
from ctxproxy.session.lineage import anonymous
from ctxproxy.stopwatch import own_work
from ctxproxy.store import Store, StoreError, StoreLock, warn_store_failure
from ctxproxy.store.keys import branch_lock_key
from ctxproxy.store.lease import renewed
from ctxproxy.strategies.base import Checkpoint, Plan
from ctxproxy.strategies.boundaries import leading_system_count
from ctxproxy.strategies.branch import (
    BranchBudget,
    applying,
    branch_checkpoint,
    handled,
    insertion_point,
    plan_branch_summary,
)
from ctxproxy.strategies.execution import PlanJob
from ctxproxy.tokens import TokenCounter

log = structlog.get_logger(__name__)


class BranchSummaries:
    def __init__(
        self,
        store: Store,
        tasks: BackgroundTasks,
        counter: TokenCounter,
        views: SessionViews,
        runner: Runner,
        forks: ForkWatch,
    ) -> None:
        self._store = store
        self._tasks = tasks
        self._counter = counter
        self._views = views
        self._runner = runner
        self._forks = forks

    async def for_request(self, req: CompactionInput, index: SessionIndex, enabled: bool) -> list[Checkpoint]:
        """The branch summaries ``req`` is forwarded with, by position (module docstring);
        ``enabled``: the tenant's strategy summarises branches."""
        config = req.tenant.compaction
        on = enabled and config.branch_summary_max_tokens > 0
        if not on and not self._forks.listening:
            return []
        applied = index.branches_for(req.chain, req.owner) if on else []
        fork = self.fork_of(req, index)
        if fork is None:
            return applied
        plan = self._plan(req, index, fork, applied) if on else None
        answer = await self._forks.tell(req, fork, plan)
        if plan is None:
            return applied
        if isinstance(answer, Vetoed):
            log.info("branch_summary.vetoed", session=req.key.value, plugin=answer.plugin, at=plan.start)
            return applied
        made = self._tasks.spawn(self._make(req, plan, answer), name="branch_summary")
        if config.mode == "background":
            return applied
        branch = await asyncio.shield(made)  # a client that goes away does not waste a summary half made
        return applied if branch is None else applying([*applied, branch], req.chain, req.owner)

    def fork_of(self, req: CompactionInput, index: SessionIndex) -> Fork[Checkpoint] | None:
        """The fork ``req`` makes from the branch its session was on, if any."""
        floor = required_shared(req.messages, anonymous(req.key, req.user, req.scope))
        if floor is None:
            return None
        return detect_fork(req.chain, req.previous, index.checkpoints, shared_at_least=floor, owner=req.owner)

    def _plan(
        self, req: CompactionInput, index: SessionIndex, fork: Fork[Checkpoint], applied: Sequence[Checkpoint]
    ) -> Plan | None:
        """The branch summary to make of ``fork``: None when the request already gets one for it
        (``applied``) or the branch left holds nothing worth keeping."""
        at = insertion_point(req.messages, fork.point)
        if at is None or handled(applied, at):
            return None
        config = req.tenant.compaction
        held = self._views.kinds.held_since(fork.left, fork.point) if not fork.seen and fork.left is not None else []
        budget = BranchBudget(config.branch_summary_max_tokens, config.branch_summary_min_tokens)
        count = partial(self._counter.count_text, model=req.model)
        return plan_branch_summary(req.messages, fork, held, count, budget, req.owner)

    async def _make(self, req: CompactionInput, plan: Plan, supplied: SuppliedSummary | None) -> Checkpoint | None:
        try:
            return await self._single_flight(req, plan, supplied)
        except StoreError as exc:
            warn_store_failure(log, exc, "branch_summary.store_unavailable", session=req.key.value, error=str(exc))
        except Exception:
            log.exception("branch_summary.failed", session=req.key.value)
        return None

    async def _single_flight(self, req: CompactionInput, plan: Plan, supplied: SuppliedSummary | None) -> Checkpoint:
        async with self._lease(req) as lease:
            if lease is not None:  # whoever held the lease before may have made it meanwhile
                again = (await self._views.load(req.key)).branches_for(req.chain, req.owner)
                made = [c for c in again if handled([c], plan.start)]
                if made:
                    return made[-1]
            # Without the lease: waited long enough, or the store fails.
            return await self._run(req, plan, supplied, lease.fence if lease is not None else None)

    @asynccontextmanager
    async def _lease(self, req: CompactionInput) -> AsyncIterator[StoreLock | None]:
        """The session's branch lease, waited for at most ``summary_timeout`` and renewed while
        held; None when it was not taken (the wait ran out, or the store failed)."""
        config = req.tenant.compaction
        lease = self._store.lock(branch_lock_key(req.key), ttl=lease_ttl(config))
        try:
            taken = await lease.acquire(blocking=True, timeout=config.summary_timeout)
        except StoreError as exc:
            warn_store_failure(log, exc, "branch_summary.store_unavailable", session=req.key.value, error=str(exc))
            taken = False
        if not taken:
            yield None
            return
        try:
            async with renewed(lease):
                yield lease
        finally:
            try:
                await lease.release()
            except StoreError as exc:  # left to be taken over or to expire
                warn_store_failure(log, exc, "branch_summary.store_unavailable", session=req.key.value, error=str(exc))

    async def _run(
        self, req: CompactionInput, plan: Plan, supplied: SuppliedSummary | None, fence: int | None
    ) -> Checkpoint:
        started = time.perf_counter()
        if supplied is not None:  # a before_fork hook's text: nothing to summarise
            branch = branch_checkpoint(plan, req.chain, supplied.text, supplied.name, time.time())
        else:
            branch = await self._summarise(req, plan)
        saved = await save_fenced(
            self._store,
            req.key,
            branch,
            fence,
            family=BRANCHES,
            events=("branch_summary.not_saved", "branch_summary.fenced"),
        )
        log.info(
            "branch_summary",
            session=req.key.value,
            saved=saved,
            at=plan.start,
            source="stored" if "held" in plan.state else "messages",
            summarizer=branch.summarizer,
            tokens=self._views.branch_tokens(req, [branch]),
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        return branch

    async def _summarise(self, req: CompactionInput, plan: Plan) -> Checkpoint:
        job = PlanJob(plan, req.messages, req.chain, leading_system_count(req.messages), None, time.time())
        executor = self._views.kinds[plan.block_kind].executor
        if executor is None:
            raise TypeError(f"block kind {plan.block_kind!r} has no executor")
        with own_work():
            return await executor(job, self._runner.host(req))


def stored_for(index: SessionIndex, req: CompactionInput, enabled: bool) -> Sequence[Checkpoint]:
    """The stored branch summaries ``req`` gets, making none (after an upstream overflow)."""
    if not enabled or req.tenant.compaction.branch_summary_max_tokens == 0:
        return []
    return index.branches_for(req.chain, req.owner)

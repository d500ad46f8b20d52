"""Executing a plan and saving what it made.

The plan's block kind says how it runs (``ctxproxy.strategies.kinds``): a kind with an executor
of its own (``paged``'s Contents Page) runs it with this request's host
(``ctxproxy.compaction.keeper.RequestHost``); a summary kind is summarised here
(``ctxproxy.compaction.execute``) by the tenant's summariser — its LLM with the extractive one as
the fallback, or the extractive one — and its memory cards are kept. Either way the new
checkpoint is added to the session's index, unless the compaction's lease was taken over
meanwhile (its fencing token is older than the index's: ``compaction.fenced``); one that cannot
be saved is still returned (forwarded, just not saved: the next request compacts again).
One ``compaction`` log line each, and the observer (``ctxproxy.compaction.observer``) hears of
it and of the execution's time.

Plugins (``ctxproxy.compaction.hooks``): ``before_compact`` hooks may veto a plan (nothing is
made: ``compaction.vetoed``) or supply its summary; ``after_compact`` hooks hear of what was
made, in the background. A tenant whose ``summarizer`` names a plugin gets it, held to the contract
(``ctxproxy.summarize.guarded``), the extractive summariser as its fallback.
"""

from __future__ import annotations

import time
from dataclasses import replace

import structlog

from ctxproxy.background import BackgroundTasks
from ctxproxy.cache import CachePool
from ctxproxy.compaction.checkpoints import save_fenced
from ctxproxy.compaction.execute import execute_plan
from ctxproxy.compaction.hooks import CompactionHooks, SuppliedSummary, Vetoed
from ctxproxy.compaction.inputs import CompactionInput
from ctxproxy.compaction.keeper import Keeper, RequestHost
from ctxproxy.compaction.observer import CompactionKind, CompactionObserver, Unobserved
from ctxproxy.compaction.views import SessionViews
from ctxproxy.compaction.windows import context_window
from ctxproxy.plugins import Plugins
from ctxproxy.session.lineage import Lineage
from ctxproxy.stopwatch import own_work
from ctxproxy.store import Store
from ctxproxy.strategies.base import Checkpoint, Plan
from ctxproxy.strategies.boundaries import leading_system_count
from ctxproxy.strategies.execution import PlanJob
from ctxproxy.summarize import ExtractiveSummarizer, LLMSummarizer
from ctxproxy.summarize.base import Summarizer
from ctxproxy.summarize.guarded import GuardedSummarizer
from ctxproxy.tokens import TokenCounter
from ctxproxy.upstream.client import UpstreamHttp

log = structlog.get_logger(__name__)


def as_kept(made: Checkpoint, current: Checkpoint | None, request_size: int) -> Checkpoint:
    """``made`` as the session keeps it: linked to ``current``, the checkpoint it was made over
    (``Checkpoint.base``), and stamped with how many messages its request held
    (``Checkpoint.made_for``), whichever executor made it."""
    if current is None or (current.end, current.prefix_hash) == (made.end, made.prefix_hash):
        return made.linked(request_size, made.base)
    return made.linked(request_size, Lineage(current.end, current.prefix_hash))


class Runner:
    def __init__(
        self,
        store: Store,
        keeper: Keeper,
        counter: TokenCounter,
        http: UpstreamHttp,
        views: SessionViews,
        caches: CachePool,
        plugins: Plugins,
        tasks: BackgroundTasks,
        observer: CompactionObserver | None = None,
    ) -> None:
        self._store = store
        self._observer: CompactionObserver = observer if observer is not None else Unobserved()
        self._keeper = keeper
        self._counter = counter
        self._http = http
        self._views = views
        # One instance: it memoises per-message analysis.
        self._extractive = ExtractiveSummarizer(counter, cache=caches.lru("summary_analysis"))
        self._plugins = plugins
        self._hooks = CompactionHooks(plugins.hooks, views.kinds, counter, tasks)

    async def run(
        self,
        req: CompactionInput,
        plan: Plan,
        current: Checkpoint | None,
        kind: CompactionKind = "planned",
        fence: int | None = None,
    ) -> Checkpoint | None:
        """Execute ``plan`` over ``req``'s messages on top of ``current`` and save the result,
        unless the session's lease was taken over since it was acquired with ``fence``; None
        when a plugin vetoed it. ``kind``: why it runs, for the observer."""
        started = time.perf_counter()
        head = leading_system_count(req.messages)
        job = PlanJob(plan, req.messages, req.chain, head, current, time.time())
        answer = await self._hooks.before(req, job)
        if isinstance(answer, Vetoed):
            log.info("compaction.vetoed", session=req.key.value, plugin=answer.plugin, range=[plan.start, plan.end])
            return None
        executor = self._views.kinds[plan.block_kind].executor
        config = req.tenant.compaction
        summary_plan = plan if answer is None else replace(plan, turn_start=None)  # a hook's covers it all
        with own_work():
            if executor is not None:
                made = await executor(job, self.host(req))
            else:
                made = await self._summarise(req, replace(job, plan=summary_plan), answer)
        self._observer.summarized(req.tenant.name, made.summarizer, time.perf_counter() - started)
        if executor is None:
            await self._keeper.remember_summary(req, summary_plan, made)
        made = as_kept(made, current, len(req.messages))
        saved = await self._save(req, made, fence)
        if saved:
            self._views.made(req.key, made)
        self._observer.compacted(req.tenant.name, config.strategy, config.mode, kind)
        log.info(
            "compaction",
            session=req.key.value,
            saved=saved,
            strategy=config.strategy,
            kind=kind,
            reason=plan.reason,
            range=[plan.start, plan.end],
            split_turn=summary_plan.turn_start is not None,
            tokens_before=self._views.conversation(req, head, current).forwarded_tokens(current),
            tokens_after=self._views.conversation(req, head, made).forwarded_tokens(made),
            summarizer=made.summarizer,
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        self._hooks.after(req, plan, made, saved)
        return made

    async def _summarise(self, req: CompactionInput, job: PlanJob, supplied: SuppliedSummary | None) -> Checkpoint:
        """A summary kind's plan, by the tenant's summariser or with the summary a hook supplied
        (then ``job``'s plan covers the whole range: its split turn, if any, is not summarised apart)."""
        summarizer: Summarizer = supplied or self.summarizer(req)
        max_tokens = req.tenant.compaction.summary_budget(req.window.budget)
        return await execute_plan(
            job.plan, job.messages, job.chain, job.head, job.previous, summarizer, max_tokens, job.now
        )

    async def _save(self, req: CompactionInput, made: Checkpoint, fence: int | None) -> bool:
        # Forwarded all the same when not saved: the next request compacts again.
        events = ("compaction.not_saved", "compaction.fenced")
        return await save_fenced(self._store, req.key, made, fence, events=events)

    def host(self, req: CompactionInput) -> RequestHost:
        """``req``'s side of the engine, lent to a block kind's executor."""
        return self._keeper.host(req, self.summarizer(req))

    def summarizer(self, req: CompactionInput) -> Summarizer:
        """The tenant's summariser for ``req``: a plugin's, guarded, or its LLM, each with the
        extractive fallback; or the extractive one."""
        config = req.tenant.compaction
        extractive = self._extractive
        if config.summarizer == "extractive":
            return extractive
        plugin = self._plugins.summarizers.get(config.summarizer)
        if plugin is not None:
            timeout = config.summary_timeout
            return GuardedSummarizer(plugin, config.summarizer, extractive, self._counter, req.model, timeout)
        model = req.summary_model
        return LLMSummarizer(
            req.completions(self._http),
            model=model,
            counter=self._counter,
            context_window=config.summary_context_window or context_window(model, req.tenant),
            fallback=extractive,
            repeated=extractive.repeated,
        )

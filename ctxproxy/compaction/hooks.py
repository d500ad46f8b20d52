"""The compaction's plugin hooks (``ctxproxy.plugins.spec``): what they are told, and what of
their answers the engine uses.

- ``before``: a plan's ``before_compact`` event. A veto comes back as ``Vetoed``; a summary as a
  ``SuppliedSummary`` (a summariser that answers with that text), unless it cannot be used —
  empty, longer than the plan's budget, or for a block kind with an executor of its own — which
  is logged as ``plugin.summary_unused`` (plugin, reason) and the summariser runs.
- ``after``: a checkpoint was made: its ``after_compact`` event.
- ``ForkWatch``: a request that forked from the session's checkpoint chain
  (``ctxproxy.session.fork``) tells ``before_fork``, once per abandoned checkpoint in this process
  (a restart or another replica may tell it again).

Events are built only when some plugin hooks them; the messages a ``before_compact`` hook sees
are a copy, so nothing it does reaches the request.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass

import structlog

from ctxproxy.cache import ByteLRU
from ctxproxy.compaction.checkpoints import SessionIndex
from ctxproxy.compaction.inputs import CompactionInput
from ctxproxy.plugins import CompactedEvent, CompactEvent, ForkEvent, HookRunner, UseSummary, Veto
from ctxproxy.session.fork import find_fork
from ctxproxy.strategies.base import Checkpoint, Plan
from ctxproxy.strategies.execution import PlanJob
from ctxproxy.strategies.kinds import BlockKinds
from ctxproxy.summarize.base import SummaryResult, SummaryTask
from ctxproxy.tokens import TokenCounter

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Vetoed:
    plugin: str


class SuppliedSummary:
    """A hook's summary, as the summariser of the plan it was given for."""

    def __init__(self, text: str, name: str) -> None:
        self.text = text
        self.name = name

    async def summarize(self, task: SummaryTask) -> SummaryResult:
        return SummaryResult(self.text, self.name)


class CompactionHooks:
    def __init__(self, hooks: HookRunner, kinds: BlockKinds, counter: TokenCounter) -> None:
        self._hooks = hooks
        self._kinds = kinds
        self._counter = counter

    async def before(self, req: CompactionInput, job: PlanJob) -> Vetoed | SuppliedSummary | None:
        if not self._hooks.has("before_compact"):
            return None
        plan, config = job.plan, req.tenant.compaction
        max_tokens = min(config.summary_max_tokens, plan.max_tokens or config.summary_max_tokens)
        previous = self._kinds.render(job.previous.blocks) if job.previous is not None else None
        event = CompactEvent(
            *_about(req, plan),
            kind=plan.block_kind,
            messages=tuple(copy.deepcopy(list(job.messages[plan.start : plan.end]))),
            previous=previous,
            max_tokens=max_tokens,
        )
        decided = await self._hooks.before_compact(event)
        if decided is None:
            return None
        if isinstance(decided.decision, Veto):
            return Vetoed(decided.plugin)
        return self._supplied(req, plan, decided.plugin, decided.decision, max_tokens)

    def _supplied(
        self, req: CompactionInput, plan: Plan, plugin: str, answer: UseSummary, max_tokens: int
    ) -> SuppliedSummary | None:
        reason = None
        if self._kinds[plan.block_kind].executor is not None:
            reason = "own_executor"
        elif not answer.text.strip():
            reason = "empty"
        elif self._counter.count_text(answer.text, req.model) > max_tokens:
            reason = "over_budget"
        if reason is not None:
            log.warning("plugin.summary_unused", plugin=plugin, reason=reason, session=req.key.value)
            return None
        return SuppliedSummary(answer.text, plugin)

    async def after(self, req: CompactionInput, plan: Plan, made: Checkpoint, saved: bool) -> None:
        if not self._hooks.has("after_compact"):
            return
        chars = len(self._kinds.render(made.blocks))
        event = CompactedEvent(*_about(req, plan), summary_chars=chars, summarizer=made.summarizer, saved=saved)
        await self._hooks.after_compact(event)


def _about(req: CompactionInput, plan: Plan) -> tuple[str, str, str, str, int, int]:
    """The fields of a ``CompactionEvent``."""
    return req.tenant.name, req.key.value, req.tenant.compaction.strategy, plan.reason, plan.start, plan.end


class ForkWatch:
    def __init__(self, hooks: HookRunner, kinds: BlockKinds, told: ByteLRU[str, bool]) -> None:
        self._hooks = hooks
        self._kinds = kinds
        self._told = told

    async def check(self, req: CompactionInput, index: SessionIndex) -> None:
        """Tell ``before_fork`` when ``req`` forks from ``index``'s checkpoints (module docstring)."""
        if not self._hooks.has("before_fork"):
            return
        fork = find_fork(index.checkpoints, req.chain)
        if fork is None:
            return
        abandoned = fork.abandoned
        told = f"{req.key.store_id}:{abandoned.end}:{abandoned.prefix_hash}"
        if told in self._told:
            return
        self._told.put(told, True, sys.getsizeof(told))
        kept = fork.kept.end if fork.kept is not None else None
        summary = self._kinds.render(abandoned.blocks)
        event = ForkEvent(req.tenant.name, req.key.value, len(req.chain), abandoned.end, summary, kept)
        await self._hooks.before_fork(event)

"""The compaction's plugin hooks (``ctxproxy.plugins.spec``): what they are told, and what of
their answers the engine uses.

- ``before``: a plan's ``before_compact`` event. A veto comes back as ``Vetoed``; a summary as a
  ``SuppliedSummary`` (a summariser that answers with that text), unless it cannot be used —
  empty, longer than the plan's budget, or for a block kind with an executor of its own — which
  is logged as ``plugin.summary_unused`` (plugin, reason) and the summariser runs.
- ``after``: a checkpoint was made: its ``after_compact`` event, run in the background (its
  answer is ignored, so neither the compaction nor the request it serves waits for it).
- ``ForkWatch``: a request that forked (``ctxproxy.session.fork``, the detection the branch
  summaries use: ``ctxproxy.compaction.branches``) tells ``before_fork``, once per fork in this
  process (a restart or another replica may tell it again). A fork is known by the newest
  checkpoint of the branch left, when that branch was compacted past the fork, else by the
  branch's last request; its answer is kept with it, so a later request of the new branch that
  sees the same fork gets the same answer without asking again. A veto comes back as
  ``Vetoed`` (no branch summary); a summary as a ``SuppliedSummary``, the branch summary's
  text, unless it cannot be used — ctxproxy makes no branch summary of this fork, or the text is
  empty or longer than ``branch_summary_max_tokens`` — which is logged as
  ``plugin.summary_unused`` and the summariser writes it.

Events are built only when some plugin hooks them; the messages a hook sees are a copy, so
nothing it does reaches the request.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass

import structlog

from ctxproxy.background import BackgroundTasks
from ctxproxy.cache import ByteLRU
from ctxproxy.compaction.inputs import CompactionInput
from ctxproxy.plugins import CompactedEvent, CompactEvent, ForkEvent, HookRunner, UseSummary, Veto
from ctxproxy.plugins.hooks import Decided
from ctxproxy.session.fork import Fork
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
    def __init__(self, hooks: HookRunner, kinds: BlockKinds, counter: TokenCounter, tasks: BackgroundTasks) -> None:
        self._hooks = hooks
        self._kinds = kinds
        self._counter = counter
        self._tasks = tasks

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
        own = self._kinds[plan.block_kind].executor is not None
        return _usable(self._counter, req, plugin, answer.text, max_tokens, "own_executor" if own else None)

    def after(self, req: CompactionInput, plan: Plan, made: Checkpoint, saved: bool) -> None:
        """Tell ``after_compact`` hooks, in the background: nothing waits for them."""
        if not self._hooks.has("after_compact"):
            return
        chars = len(self._kinds.render(made.blocks))
        event = CompactedEvent(*_about(req, plan), summary_chars=chars, summarizer=made.summarizer, saved=saved)
        self._tasks.spawn(self._hooks.after_compact(event), name="after_compact")


def _about(req: CompactionInput, plan: Plan) -> tuple[str, str, str, str, int, int]:
    """The fields of a ``CompactionEvent``."""
    return req.tenant.name, req.key.value, req.tenant.compaction.strategy, plan.reason, plan.start, plan.end


def _usable(
    counter: TokenCounter, req: CompactionInput, plugin: str, text: str, max_tokens: int, reason: str | None
) -> SuppliedSummary | None:
    """A hook's summary ``text``, or None when it cannot be used (for ``reason``, or empty, or
    longer than ``max_tokens``), which is logged."""
    if reason is None and not text.strip():
        reason = "empty"
    elif reason is None and counter.count_text(text, req.model) > max_tokens:
        reason = "over_budget"
    if reason is not None:
        log.warning("plugin.summary_unused", plugin=plugin, reason=reason, session=req.key.value)
        return None
    return SuppliedSummary(text, plugin)


@dataclass(frozen=True)
class _Told:
    """What the answer of a fork's ``before_fork`` hooks came to."""

    answer: Vetoed | SuppliedSummary | None


class ForkWatch:
    def __init__(self, hooks: HookRunner, kinds: BlockKinds, counter: TokenCounter, told: ByteLRU[str, _Told]) -> None:
        self._hooks = hooks
        self._kinds = kinds
        self._counter = counter
        self._told = told

    @property
    def listening(self) -> bool:
        """Whether some plugin hooks ``before_fork``."""
        return self._hooks.has("before_fork")

    async def tell(
        self, req: CompactionInput, fork: Fork[Checkpoint], plan: Plan | None
    ) -> Vetoed | SuppliedSummary | None:
        """Tell ``before_fork`` that ``req`` made ``fork`` (module docstring); ``plan``: the branch
        summary ctxproxy makes of it, if any. What the answer comes to."""
        if not self.listening:
            return None
        left = fork.left
        at = (left.end, left.prefix_hash) if left is not None else (fork.tip.length, fork.tip.prefix)
        told_as = f"{req.key.store_id}:{at[0]}:{at[1]}"
        told = self._told.get(told_as)
        if told is not None:
            return told.answer
        max_tokens = (plan.max_tokens or 0) if plan is not None else 0
        event = ForkEvent(
            req.tenant.name,
            req.key.value,
            len(req.chain),
            abandoned_end=left.end if left is not None else None,
            abandoned_summary=self._kinds.render(left.blocks) if left is not None else None,
            kept_end=fork.kept.end if fork.kept is not None else None,
            point=fork.point,
            branch=tuple(copy.deepcopy(list(fork.messages))),
            max_tokens=max_tokens,
        )
        answer = self._answer(req, await self._hooks.before_fork(event), max_tokens)
        size = sys.getsizeof(told_as) + (len(answer.text) if isinstance(answer, SuppliedSummary) else 0)
        self._told.put(told_as, _Told(answer), size)
        return answer

    def _answer(
        self, req: CompactionInput, decided: Decided | None, max_tokens: int
    ) -> Vetoed | SuppliedSummary | None:
        if decided is None:
            return None
        if isinstance(decided.decision, Veto):
            return Vetoed(decided.plugin)
        reason = None if max_tokens > 0 else "no_branch_summary"
        return _usable(self._counter, req, decided.plugin, decided.decision.text, max_tokens, reason)

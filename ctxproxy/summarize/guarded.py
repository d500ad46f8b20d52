"""A plugin's summariser (``[compaction] summarizer = "<plugin>"``), held to the contract.

The plugin's ``summarize`` is called isolated (``ctxproxy.plugins.isolation``: at most
``timeout`` seconds, its exceptions caught). Its answer is used when it is a ``SummaryResult``-like
object whose ``text`` is a non-empty string no longer than the task's ``max_tokens`` (by the
request model's count), recorded as written by the plugin (its name). Otherwise the ``fallback``
summariser (extractive) writes the summary, and ``summary.plugin_fallback`` is logged with the
plugin's name and why: the error's type, ``timeout``, ``bad_answer``, ``empty`` or ``over_budget``
(never the text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog

from ctxproxy.plugins.isolation import Failed, isolated
from ctxproxy.summarize.base import Summarizer, SummaryResult, SummaryTask
from ctxproxy.tokens import TokenCounter

log = structlog.get_logger(__name__)


@dataclass
class GuardedSummarizer:
    plugin: Any  # the plugin's summariser
    name: str  # the plugin's name
    fallback: Summarizer
    counter: TokenCounter
    model: str | None  # the request's, whose encoding counts the summary
    timeout: float

    async def summarize(self, task: SummaryTask) -> SummaryResult:
        answer = await isolated(self.plugin.summarize, task, timeout=self.timeout)
        why = answer.error if isinstance(answer, Failed) else self._unusable(answer, task)
        if why is None:
            return SummaryResult(answer.text, self.name)
        log.warning("summary.plugin_fallback", plugin=self.name, reason=why, flavour=task.flavour)
        return await self.fallback.summarize(task)

    def _unusable(self, answer: Any, task: SummaryTask) -> str | None:
        text = getattr(answer, "text", None)
        if not isinstance(text, str):
            return "bad_answer"
        if not text.strip():
            return "empty"
        if self.counter.count_text(text, self.model) > task.max_tokens:
            return "over_budget"
        return None

"""A summariser is given the whole conversation beside the range, so it can tell what repeats."""

from __future__ import annotations

from typing import Any

from ctxproxy.compaction.execute import execute_plan
from ctxproxy.session import PrefixChain
from ctxproxy.strategies.base import Plan
from ctxproxy.summarize import SummaryResult, SummaryTask


class Recording:
    name = "recording"

    def __init__(self) -> None:
        self.tasks: list[SummaryTask] = []

    async def summarize(self, task: SummaryTask) -> SummaryResult:
        self.tasks.append(task)
        return SummaryResult("### Goal\n- x", self.name)


async def test_the_task_carries_the_whole_conversation_as_context() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"},
        {"role": "system", "content": "Available agent types: Explore, Plan."},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>\n\nGo on"},
    ]
    summarizer = Recording()
    await execute_plan(
        Plan(start=1, end=4, reason="test"), messages, PrefixChain.of(messages), 1, None, summarizer, 200, 0.0
    )
    [task] = summarizer.tasks
    assert [m["content"] for m in task.messages] == [messages[1]["content"], "ok"]  # system messages left out
    assert list(task.context) == messages  # everything the request sent, the kept part included

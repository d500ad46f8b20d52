"""The conversation one Messages request's tool loop builds (``MessageRounds``, its rounds
posted through ``ctxproxy.wire.item_loop.ItemLoop``): the next payload, what earlier rounds showed
the client, the usage summed so far, and — from ``ctxproxy.tools.progress``, shared with chat
completions — the rounds answered, the window budget and the call ids.

The next payload is the one before with the round appended (``tool_blocks.sent_back`` and
``results_message``) and, once the next round must be the last, ``tool_choice: {"type": "none"}``:
the model may not call a tool and answers in text (the anthropic SDK's ``ToolChoiceNoneParam``: "The
model will not be allowed to use tools"; the tool-use guide lists ``none`` among the choices,
https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use; unlike ``any`` and
``tool``, it is not forced tool use, which extended thinking does not allow).
``tools`` stays as it was, so the prefix stays the same and the conversation's ``tool_use`` blocks
keep their definitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxproxy.tools.budget import NO_ROOM, Budget
from ctxproxy.tools.calls import ProxyCall
from ctxproxy.wire.anthropic.tool_blocks import (
    result_message,
    results_message,
    sent_back,
    shown,
    tool_ids,
    with_answers,
)
from ctxproxy.wire.item_loop import ItemLoop, ItemLoopRounds

__all__ = ["LAST_ROUND", "MessageRounds"]

LAST_ROUND = {"type": "none"}  # the tool_choice of a round that must answer in text


class MessageRounds(ItemLoopRounds):
    """The conversation one request's loop builds."""

    last_choice = LAST_ROUND

    def __init__(self, loop: ItemLoop, payload: dict[str, Any], budget: Budget) -> None:
        super().__init__(loop, payload, budget, tool_ids(payload.get("messages") or []))

    async def answer(self, content: Sequence[Any], calls: Sequence[ProxyCall]) -> None:
        """Answer one round (its ``content``, which made ``calls``) and make the next payload."""
        calls = self.unique(calls)
        tools = self._loop.tools
        turn = sent_back(content, calls, tools)
        answers, budget, starved = await self._loop.answering.answer(turn, calls, self.budget, result_message)
        self.earlier += shown(content, tools)
        self.advance([turn, results_message(calls, answers)], budget, starved)

    def without_answers(self, messages: list[Any], start: int) -> list[Any]:
        return with_answers(messages, start, NO_ROOM)

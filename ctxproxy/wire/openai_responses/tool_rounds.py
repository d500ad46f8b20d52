"""The conversation one Responses request's tool loop builds (``ResponseRounds``, its rounds posted
through ``ctxproxy.wire.item_loop.ItemLoop``): the next payload, what earlier rounds showed the
client, the usage summed so far, and — from ``ctxproxy.tools.progress``, shared by every protocol —
the rounds answered, the window budget and the call ids.

The next payload is the one before with the round's output items and one ``function_call_output``
per call appended to ``input`` (``tool_items``) and, once the next round must be the last,
``tool_choice: "none"``. ``tools`` stays as it was, so the prefix stays the same. A stateless
request (``store: false``) is asked for its reasoning's ``encrypted_content``
(``include``), without which a round's reasoning items could not be sent back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ctxproxy.tools.budget import NO_ROOM, Budget
from ctxproxy.tools.calls import ProxyCall
from ctxproxy.wire.item_loop import ItemLoop, ItemLoopRounds
from ctxproxy.wire.openai_responses.tool_items import (
    output_item,
    outputs,
    sent_back,
    shown,
    tool_ids,
    with_answers,
)

__all__ = ["ENCRYPTED_REASONING", "ResponseRounds", "first_payload"]

ENCRYPTED_REASONING: Final = "reasoning.encrypted_content"


def first_payload(body: dict[str, Any]) -> dict[str, Any]:
    """Round 1: ``body``, with the reasoning's encrypted content asked for when nothing is stored."""
    include = body.get("include")
    if body.get("store") is not False or (isinstance(include, list) and ENCRYPTED_REASONING in include):
        return body
    return {**body, "include": [*(include if isinstance(include, list) else []), ENCRYPTED_REASONING]}


class ResponseRounds(ItemLoopRounds):
    """The conversation one request's loop builds."""

    last_choice = "none"
    conversation = "input"

    def __init__(self, loop: ItemLoop, payload: dict[str, Any], budget: Budget) -> None:
        items = payload.get("input")
        super().__init__(loop, payload, budget, tool_ids(items if isinstance(items, list) else []))

    @property
    def first_prompt(self) -> int | None:
        """Round 1's ``input_tokens``: the prompt the pipeline counted."""
        tokens = self.first_usage.get("input_tokens") if self.first_usage is not None else None
        return tokens if type(tokens) is int else None

    async def answer(self, output: Sequence[Any], calls: Sequence[ProxyCall]) -> None:
        """Answer one round (its ``output``, which made ``calls``) and make the next payload."""
        calls = self.unique(calls)
        tools = self._loop.tools
        turn = sent_back(output, calls, tools)
        answers, budget, starved = await self._loop.answering.answer({"input": turn}, calls, self.budget, _carrier)
        self.earlier += shown(output, tools)
        self.advance([*turn, *outputs(calls, answers)], budget, starved)

    def without_answers(self, messages: list[Any], start: int) -> list[Any]:
        return with_answers(messages, start, NO_ROOM)


def _carrier(call_id: str, answer: str) -> Mapping[str, Any]:
    """One answer as the loop counts it: a fragment of ``input``."""
    return {"input": [output_item(call_id, answer)]}

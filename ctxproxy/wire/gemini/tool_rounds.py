"""The conversation one Gemini request's tool loop builds (``GeminiRounds``, its rounds posted
through ``ctxproxy.wire.item_loop.ItemLoop``): the next payload, what earlier rounds showed the
client, the usage summed so far, and — from ``ctxproxy.tools.progress``, shared by every protocol —
the rounds answered, the window budget and the call ids.

The next payload is the one before with the round's ``model`` content and one ``user`` content of
responses appended to ``contents`` (``tool_parts``) and, once the next round must be the last,
function calling turned off (``toolConfig.functionCallingConfig.mode: NONE``, under the client's
spelling of ``toolConfig``). ``tools`` stays as it was, so the prefix stays the same. Every round
is posted as the client's request was: the same path (streamed or not), headers and query
(``GeminiCall``'s, the key moved out of the query).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxproxy.tools.budget import NO_ROOM, Budget
from ctxproxy.tools.calls import ProxyCall
from ctxproxy.wire.gemini.fields import field, spelled
from ctxproxy.wire.gemini.tool_parts import (
    model_content,
    response_part,
    results_content,
    shown,
    tool_ids,
    with_answers,
)
from ctxproxy.wire.item_loop import ItemLoop, ItemLoopRounds

__all__ = ["GeminiRounds"]

NONE_MODE = {"mode": "NONE"}


class GeminiRounds(ItemLoopRounds):
    """The conversation one request's loop builds."""

    last_choice = NONE_MODE
    conversation = "contents"

    def __init__(self, loop: ItemLoop, payload: dict[str, Any], budget: Budget) -> None:
        contents = payload.get("contents")
        super().__init__(loop, payload, budget, tool_ids(contents if isinstance(contents, list) else []))

    async def answer(self, parts: Sequence[Any], calls: Sequence[ProxyCall]) -> None:
        """Answer one round (its ``parts``, which made ``calls``) and make the next payload."""
        calls = self.unique(calls)
        tools = self._loop.tools
        turn = model_content(parts)
        answers, budget, starved = await self._loop.answering.answer({"contents": [turn]}, calls, self.budget, _carrier)
        self.earlier += shown(parts, tools)
        self.advance([turn, results_content(turn["parts"], answers, tools)], budget, starved)

    def without_answers(self, messages: list[Any], start: int) -> list[Any]:
        return with_answers(messages, start, NO_ROOM)

    def _next(self, messages: list[Any]) -> dict[str, Any]:
        out = {**self.payload, self.conversation: messages}
        if self.closed:
            name = spelled(out, "toolConfig") or "toolConfig"
            config = field(out, "toolConfig")
            config = config if isinstance(config, Mapping) else {}
            calling = spelled(config, "functionCallingConfig") or "functionCallingConfig"
            out[name] = {**config, calling: dict(NONE_MODE)}
        return out


def _carrier(call_id: str, answer: str) -> Mapping[str, Any]:
    """One answer as the loop counts it: a fragment of ``contents``."""
    return {"contents": [{"role": "user", "parts": [response_part("ctxproxy", answer)]}]}

"""What every round of one request's chat completions tool loop shares (``Loop``) and the
conversation it builds (``Rounds``): the next payload, the text shown so far, and — from
``ctxproxy.tools.progress``, which every protocol's loop shares — the rounds answered, the window
budget and the call ids.

``Rounds`` gives every call it answers an id no other call of the request has (``unique_ids``):
an upstream may leave ids out, or number its calls from 0 again in every round, and a
conversation in which two calls share an id cannot say which answer belongs to which call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.tools.budget import NO_ROOM, Budget, Counting
from ctxproxy.tools.calls import (
    ProxyCall,
    assistant_turn,
    call_ids,
    joined_text,
    replace_answers,
    round_messages,
    separator_after,
    tool_message,
    wants_answers,
)
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.tools.progress import Answering, Progress, ToolExecutor
from ctxproxy.upstream.http1 import UpstreamResponse
from ctxproxy.upstream.port import UpstreamPort
from ctxproxy.vocabulary import CHAT_COMPLETIONS_PATH


@dataclass(frozen=True)
class Loop:
    """What every round of one request shares."""

    request: web.Request
    port: UpstreamPort
    tenant: TenantConfig
    tools: ProxyTools
    client_names: frozenset[str]
    execute: ToolExecutor
    counting: Counting

    def post(self, payload: Mapping[str, Any]) -> AbstractAsyncContextManager[UpstreamResponse]:
        """Post one round exactly as the chat handler posts a request (``UpstreamPort``); the
        response is closed when the block ends."""
        query = self.request.rel_url.raw_query_string
        return self.port.post(CHAT_COMPLETIONS_PATH, orjson.dumps(payload), self.request.headers, raw_query=query)

    async def answer(
        self, turn: Mapping[str, Any], calls: Sequence[ProxyCall], budget: Budget
    ) -> tuple[list[str], Budget, bool]:
        """The answers to ``calls`` (made in ``turn``), each in a ``tool`` message (``Answering``)."""
        answering = Answering(self.execute, self.counting, self.tenant.tools.result_max_tokens)
        return await answering.answer(turn, calls, budget, tool_message)


class Rounds(Progress):
    """The conversation one request's loop builds: its next payload, rounds, budget and shown text."""

    last_choice = "none"

    def __init__(self, loop: Loop, payload: dict[str, Any], budget: Budget) -> None:
        super().__init__(loop.tenant.tools.max_rounds, budget, payload, call_ids(payload.get("messages") or []))
        self._loop = loop
        self._texts: list[str] = []
        self._reasoning: list[str] = []

    def wants(self, proxy: Sequence[ProxyCall], client_calls: bool, finish_reason: object) -> bool:
        return not self.closed and wants_answers(proxy, client_calls, finish_reason)

    def shown(self, text: object, reasoning: object = None) -> None:
        """A round's text and reasoning have reached the client (streamed) or will (JSON)."""
        if isinstance(text, str) and text:
            self._texts.append(text)
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)

    @property
    def lead(self) -> str:
        """What the next round's text is preceded by, for the client."""
        return separator_after(self.earlier)

    @property
    def reasoning_lead(self) -> str:
        """What the next round's reasoning is preceded by, for the client."""
        return separator_after(self.earlier_reasoning)

    @property
    def earlier(self) -> str:
        return joined_text(self._texts)

    @property
    def earlier_reasoning(self) -> str:
        return joined_text(self._reasoning)

    async def answer(self, content: object, calls: Sequence[ProxyCall], reasoning: object) -> None:
        """Answer one round's calls and make the next payload."""
        calls = self.unique(calls)
        turn = assistant_turn(content, calls, reasoning)
        answers, budget, starved = await self._loop.answer(turn, calls, self.budget)
        self.advance(round_messages(turn, calls, answers), budget, starved)

    def without_answers(self, messages: list[Any], start: int) -> list[Any]:
        return replace_answers(messages, start, NO_ROOM)

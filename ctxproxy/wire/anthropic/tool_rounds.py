"""What every round of one Messages request's tool loop shares (``MessagesLoop``) and the
conversation it builds (``MessageRounds``): the next payload, what earlier rounds showed the client,
the usage summed so far, and — from ``ctxproxy.tools.progress``, shared with chat completions — the
rounds answered, the window budget and the call ids.

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

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.services import HTTP
from ctxproxy.tools.budget import NO_ROOM, Budget, Counting
from ctxproxy.tools.calls import ProxyCall, add_usage
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.tools.progress import Answering, Progress, ToolExecutor
from ctxproxy.upstream.port import UpstreamPort
from ctxproxy.wire.anthropic.forward import API_KEY, MESSAGES_PATH
from ctxproxy.wire.anthropic.sse import Usage, usage_of
from ctxproxy.wire.anthropic.tool_blocks import (
    TOOL_USE,
    result_message,
    results_message,
    sent_back,
    shown,
    tool_ids,
    with_answers,
)

__all__ = ["LAST_ROUND", "MessageRounds", "MessagesLoop"]

LAST_ROUND = {"type": "none"}  # the tool_choice of a round that must answer in text


@dataclass(frozen=True)
class MessagesLoop:
    """What every round of one request shares."""

    request: web.Request
    port: UpstreamPort  # with the Messages API's key header
    tools: ProxyTools
    answering: Answering
    max_rounds: int

    @classmethod
    def open(
        cls, request: web.Request, tenant: TenantConfig, tools: ProxyTools, execute: ToolExecutor, counting: Counting
    ) -> MessagesLoop:
        """The loop of one request: its tenant's upstream and ``[tools]`` limits, our ``tools`` as
        offered, their answers from ``execute``; ``counting`` measures a Messages message as the
        pipeline counts one."""
        port = UpstreamPort(request.app[HTTP], tenant.upstream, key_header=API_KEY)
        answering = Answering(execute, counting, tenant.tools.result_max_tokens)
        return cls(request, port, tools, answering, tenant.tools.max_rounds)

    def post(self, payload: Mapping[str, Any]) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
        """Post one round as a Messages request is posted; the response is closed when the block ends."""
        query = self.request.rel_url.raw_query_string
        return self.port.post(MESSAGES_PATH, orjson.dumps(payload), self.request.headers, raw_query=query)


class MessageRounds(Progress):
    """The conversation one request's loop builds."""

    last_choice = LAST_ROUND

    def __init__(self, loop: MessagesLoop, payload: dict[str, Any], budget: Budget) -> None:
        super().__init__(loop.max_rounds, budget, payload, tool_ids(payload.get("messages") or []))
        self._loop = loop
        self.earlier: list[Any] = []  # what the answered rounds showed the client, in order
        self.usage: dict[str, Any] | None = None  # summed over the rounds so far
        self.first_usage = Usage()  # round 1's: the prompt the pipeline counted

    def add_usage(self, usage: object) -> None:
        """One round's usage (``input_tokens``, ``output_tokens``, the cache counts …)."""
        if not isinstance(usage, Mapping):
            return
        if self.rounds == 0:
            self.first_usage = usage_of(usage) or Usage()
        self.usage = add_usage(self.usage, usage)

    def wants(self, calls: Sequence[ProxyCall], client_calls: bool, stop_reason: object) -> bool:
        """Whether to answer this round's calls and ask again: the model stopped to call ours only,
        and another round may follow. A turn that also calls the client's tools goes to the client."""
        return not self.closed and bool(calls) and not client_calls and stop_reason == TOOL_USE

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

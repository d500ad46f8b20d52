"""What every round of one request's tool loop shares (``Loop``) and the conversation it builds
(``Rounds``): the next payload, the rounds answered, the window budget and the text shown so far.

``Rounds`` gives every call it answers an id no other call of the request has (``unique_ids``):
an upstream may leave ids out, or number its calls from 0 again in every round, and a
conversation in which two calls share an id cannot say which answer belongs to which call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import structlog
from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.tools.budget import MAX_CALLS_PER_ROUND, MIN_ANSWER_TOKENS, NO_ROOM, TOO_MANY, Budget, Counting
from ctxproxy.tools.calls import (
    ProxyCall,
    assistant_turn,
    call_ids,
    joined_text,
    replace_answers,
    round_messages,
    separator_after,
    tool_message,
    unique_ids,
    wants_answers,
)
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.upstream.port import UpstreamPort
from ctxproxy.vocabulary import CHAT_COMPLETIONS_PATH

log = structlog.get_logger(__name__)

ToolExecutor = Callable[[str, Mapping[str, Any] | None, str, int], Awaitable[str]]
"""(internal tool name, arguments when they are a JSON object else None, raw arguments, the most
tokens the answer may take) → the ``tool`` message content. Bad arguments are answered with an
explanation, not an exception."""

EXECUTOR_FAILED = "ctxproxy could not answer this call because of an internal error. Answer without it."
LATER_OVERFLOW = (
    "The conversation does not fit the model's context window once ctxproxy's tool answers are added: the "
    "upstream refused a later round of ctxproxy's tool loop, and again after ctxproxy withdrew its answers. "
    "Shorten the newest messages or use a model with a larger window."
)


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

    def post(self, payload: Mapping[str, Any]) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
        """Post one round exactly as the chat handler posts a request (``UpstreamPort``); the
        response is closed when the block ends."""
        query = self.request.rel_url.raw_query_string
        return self.port.post(CHAT_COMPLETIONS_PATH, orjson.dumps(payload), self.request.headers, raw_query=query)

    async def answer(
        self, turn: Mapping[str, Any], calls: Sequence[ProxyCall], budget: Budget
    ) -> tuple[list[str], Budget, bool]:
        """The answers to ``calls`` (made in ``turn``), the budget once the round is added, and
        whether the next round must be the last (no room for more)."""
        count = self.counting.count_message
        budget = budget.spend(count(turn))
        answered = min(len(calls), MAX_CALLS_PER_ROUND)
        answers: list[str] = []
        starved = False
        for position, call in enumerate(calls):
            if position >= answered:
                text = TOO_MANY
            else:
                share = budget.share(count(tool_message(call.id, "")), answered - position)
                limit = min(share, self.tenant.tools.result_max_tokens)
                starved = starved or limit < MIN_ANSWER_TOKENS
                text = NO_ROOM if limit < MIN_ANSWER_TOKENS else self.counting.clip(await self._one(call, limit), limit)
            answers.append(text)
            budget = budget.spend(count(tool_message(call.id, text)))
        return answers, budget, starved or budget.exhausted

    async def _one(self, call: ProxyCall, limit: int) -> str:
        try:
            return await self.execute(call.name, call.parsed_arguments(), call.arguments, limit)
        except Exception:
            log.exception("tools.executor_failed", tool=call.name)
            return EXECUTOR_FAILED


class Rounds:
    """The conversation one request's loop builds: its next payload, rounds, budget and shown text."""

    def __init__(self, loop: Loop, payload: dict[str, Any], budget: Budget) -> None:
        self._loop = loop
        self.payload = payload
        self._messages = list(payload.get("messages") or [])
        self._start = len(self._messages)  # the loop's own messages begin here
        self._ids = call_ids(self._messages)  # every tool call id the conversation holds
        self.budget = budget
        self.rounds = 0
        self.closed = False  # the payload forbids further calls: whatever the model calls is not answered
        self._withdrawn = False
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
        calls, self._ids = unique_ids(calls, self._ids)
        turn = assistant_turn(content, calls, reasoning)
        answers, self.budget, starved = await self._loop.answer(turn, calls, self.budget)
        self._messages += round_messages(turn, calls, answers)
        self.rounds += 1
        self.closed = self.rounds >= self._loop.tenant.tools.max_rounds or starved
        self.payload = self._next(self._messages)

    def withdraw(self) -> bool:
        """After a later round overflowed: the same round with every answer the loop gave replaced by
        ``NO_ROOM``, and the last. False when that was already tried."""
        if self._withdrawn or self.rounds == 0:
            return False
        self._withdrawn = self.closed = True
        self.payload = self._next(replace_answers(self._messages, self._start, NO_ROOM))
        return True

    def _next(self, messages: list[Any]) -> dict[str, Any]:
        out = {**self.payload, "messages": messages}
        if self.closed:
            out["tool_choice"] = "none"
        return out


def log_done(rounds: int, stream: bool, outcome: str) -> None:
    """The loop's one line when it ends; at debug when no proxy tool was called."""
    (log.info if rounds else log.debug)("tools.loop_done", tool_rounds=rounds, stream=stream, outcome=outcome)

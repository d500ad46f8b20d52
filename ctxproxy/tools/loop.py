"""The proxy-tool loop for chat completions: ``driver``'s one loop in chat completions' shapes
(``ChatDialect``): forward a chat request with our tools, answer our calls, ask again.

Round 1 goes upstream like any chat request, with ``with_tools(body, tools)``. While the model's
answer calls only our tools, ctxproxy answers them (``execute``), appends the assistant message and
one ``tool`` message per call, and posts again — at most ``[tools] max_rounds`` tool rounds; the
call after the last of them carries ``tool_choice: "none"`` so the model has to answer in text. The
client gets only that final answer: usage summed over every round, our calls never, and (JSON
answers only, ``ctxproxy.tools.report``) ``X-Ctx-Tool-Rounds`` saying how many rounds were answered.

Window: the loop starts from the prompt as the chat handler forwarded it (its token count and the
model's window, ``Budget``) and counts everything it appends. Each round's answers share the room
left, so the next round fits (``budget``); a call with no room left is answered ``NO_ROOM`` and
the next round is the last, as it is once the room left could not hold another answer. Each answer
is also at most the tenant's ``result_max_tokens``, and at most ``MAX_CALLS_PER_ROUND`` calls of a
round are answered (the others are told to call again).

Text: what every round says reaches the client — streamed as it is generated, and in the JSON
answer's message — with a blank line before a round's text unless the text before it already
ends in whitespace (``joined_text``). Reasoning (``reasoning_content``) is joined the same way.

Conversation: each round appends the assistant message with our calls and one ``tool`` message
per call (``rounds``); every call gets an id no other call of the request has, so each answer
names its own call even when the upstream leaves ids out or repeats them.

Streaming (``stream``'s ``RoundFilter``, ``stream_relay``'s ``ChatStream``): the client's response
starts when round 1's first events are known not to be a context overflow; every round is relayed
into it as it is generated, our calls taken out, and it ends with one finish chunk, the summed
usage and ``[DONE]`` — or, when a round fails or its stream ends before its ``[DONE]``, with an
error event and ``[DONE]``.

Mixed turns: when one answer calls the client's tools and ours, ours are *not* answered. They are
stripped and the client gets its own calls (renumbered from 0), exactly as if the model had made
only those. The client's next request — its assistant message with its calls, then its tool
results — is a valid conversation, and the model can call our tools again then if it still needs
to. Answering ours first would need a second upstream call whose answer might no longer contain
the client's calls, and the client would have waited for nothing.

Errors: an overflow in round 1 (HTTP error or the first SSE events) returns ``Overflow()`` with
nothing sent, so the caller can compact and retry. An overflow in a later round (our count of the
prompt was lower than the upstream's) is retried once, with every answer the loop gave replaced
by ``NO_ROOM`` and ``tool_choice: "none"``: the same conversation shape, about as long as round 1's
prompt. If that overflows too, the client gets a ``context_length_exceeded`` error (a 400, or an
SSE error event and ``[DONE]`` once the stream has started). Any other upstream error in a later
round is relayed as it is (JSON) or as an SSE error event and ``[DONE]``. A failing executor does
not end the request: the model is told the call failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.tools.budget import Budget, Counting
from ctxproxy.tools.calls import (
    add_usage,
    as_mapping,
    final_answer,
    finish_allows_answers,
    first_choice,
    split_calls,
)
from ctxproxy.tools.definitions import ProxyTools, client_tool_names, with_tools
from ctxproxy.tools.driver import LoopDialect, RoundRead, json_rounds, stream_rounds
from ctxproxy.tools.progress import ToolExecutor
from ctxproxy.tools.round_io import RoundFeed
from ctxproxy.tools.rounds import Loop, Rounds
from ctxproxy.tools.stream import RoundFilter, RoundResult, closing_events
from ctxproxy.tools.stream_relay import CHAT_STREAM, ChatStream
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.upstream.port import UpstreamPort
from ctxproxy.upstream.sse import DONE, truncated_event

__all__ = ["ChatDialect", "ToolExecutor", "forward_with_tools"]


async def forward_with_tools(
    request: web.Request,
    http: UpstreamHttp,
    tenant: TenantConfig,
    body: dict[str, Any],
    stream: bool,
    ctx_headers: Mapping[str, str],
    tools: ProxyTools,
    execute: ToolExecutor,
    budget: Budget,
    counting: Counting,
    log_fields: dict[str, Any] | None = None,
) -> web.StreamResponse | Overflow:
    """Forward ``body`` (already compacted) with our tools and answer our calls; see the module doc.

    ``budget``: the model's window and the forwarded prompt's tokens (messages and every tool
    definition); ``counting`` measures what the loop adds, with the same counter; ``log_fields``:
    the request's log line (it gets the upstream's status)."""
    loop = Loop(request, UpstreamPort(http, tenant.upstream), tenant, tools, client_tool_names(body), execute, counting)
    dialect = ChatDialect(loop, Rounds(loop, with_tools(body, tools), budget), _include_usage(body))
    if log_fields is not None:
        dialect.log_fields = log_fields
    return await (stream_rounds(dialect, ctx_headers) if stream else json_rounds(dialect, ctx_headers))


def _include_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, Mapping) and options.get("include_usage") is True


@dataclass
class ChatDialect(LoopDialect):
    """Chat completions' shapes for one request's loop (``ctxproxy.tools.driver.ToolDialect``)."""

    loop: Loop
    rounds: Rounds
    include_usage: bool
    log_fields: dict[str, Any] = field(default_factory=dict)
    usage: Mapping[str, Any] | None = None  # summed over the rounds so far
    completion_id: str | None = None  # round 1's, which every later round takes
    stream_shape: ChatStream = CHAT_STREAM

    def read(self, answer: Mapping[str, Any]) -> RoundRead:
        choice = first_choice(answer)
        message = as_mapping(choice.get("message")) or {}
        proxy, client = split_calls(message, self.loop.tools)
        said = (message.get("content"), message.get("reasoning_content"))
        complete = finish_allows_answers(choice.get("finish_reason"))
        return RoundRead(proxy, bool(client), complete, said, as_mapping(answer.get("usage")))

    def add_usage(self, usage: Mapping[str, Any] | None) -> None:
        self.usage = add_usage(self.usage, usage)

    async def answer_round(self, read: RoundRead) -> None:
        content, reasoning = read.content
        self.rounds.shown(content, reasoning)
        await self.rounds.answer(content, read.calls, reasoning)

    def final(self, answer: Mapping[str, Any]) -> dict[str, Any]:
        return final_answer(answer, self.loop.tools, self.usage, self.rounds.earlier, self.rounds.earlier_reasoning)

    def feed(self, previous: RoundResult | None) -> RoundFeed[RoundResult]:
        if previous is not None and self.completion_id is None:
            self.completion_id = previous.completion_id
        rounds = self.rounds
        return RoundFilter(
            self.loop.tools,
            self.completion_id,
            client_names=self.loop.client_names,
            lead=rounds.lead,
            reasoning_lead=rounds.reasoning_lead,
        )

    def closing(self, last: RoundResult) -> bytes:
        return closing_events(last, self.usage, self.include_usage, self.rounds.rounds) + DONE

    def truncated(self) -> bytes:
        return truncated_event() + DONE

"""The proxy-tool loop for Messages clients: ``ctxproxy.tools.driver``'s loop in the Messages API's shapes.

Round 1 is the forwarded body with our tools after the client's (``tools.offer_tools``). While an
answer stops for ``tool_use`` and every ``tool_use`` block in it is ours, ctxproxy answers the calls
(the request's ``ToolExecutor``, within the window: ``ctxproxy.tools.progress.Answering``), appends
the assistant message as the model made it and one user message of ``tool_result`` blocks, and
posts again — at most ``[tools] max_rounds`` tool rounds; the round after the last carries
``tool_choice: {"type": "none"}`` so the model answers in text (``tool_rounds``). Every round goes
through the ``UpstreamPort`` with the Messages API's key header, with the client's query and headers.

The client gets one message: what every earlier round showed (its blocks but our ``tool_use``:
text, thinking), then the final answer's content without our calls, the final ``stop_reason``, and
the usage summed over every round (``tool_blocks.final_message``), and (JSON answers only,
``ctxproxy.tools.report``) ``X-Ctx-Tool-Rounds`` saying how many rounds were answered. A turn that
calls the client's tools and ours is the client's: ours are stripped, unanswered, and its calls
reach it unchanged. An answer with no call of ours reaches the client as the upstream's own bytes.

Streamed, every round is relayed as it is generated through a ``tool_stream.RoundEvents`` (our
``tool_use`` blocks taken out, the content blocks numbered from 0 across the rounds); a round that
goes on to answer our calls has its ``message_delta`` and ``message_stop`` held back, later rounds'
``message_start`` is not relayed, and the last round's ``message_delta`` carries the usage summed
over every round, then ``message_stop``. However a round fails, the client's stream ends with one
``error`` event (``MessagesStream``): the upstream's own, one saying what failed (a later round
refused — as ``invalid_request_error`` when it did not fit even with the answers withdrawn —, a
transport failure, an HTTP error answer to a later round, whose error object is kept when it is
one), or ``relay.TRUNCATED`` when a round's stream ended before its ``message_stop``.

The answer's usage, summed, says nothing of one prompt; round 1's does, and is what the pipeline
learns the prompt's size from (``forward.relayed``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ctxproxy.errors import ProxyError, UpstreamError
from ctxproxy.pipeline.wire import Relayed
from ctxproxy.services import LOG_FIELDS
from ctxproxy.tools.budget import Budget
from ctxproxy.tools.driver import RoundRead, RoundsDialect, json_rounds, stream_rounds
from ctxproxy.tools.round_io import RoundFeed, error_object, round_failed
from ctxproxy.upstream.opening import EventKinds
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.upstream.sse import EventFramer
from ctxproxy.wire.anthropic.errors import error_event
from ctxproxy.wire.anthropic.forward import relayed
from ctxproxy.wire.anthropic.relay import MESSAGES_EVENTS, TRUNCATED, MessagesFramer
from ctxproxy.wire.anthropic.sse import Usage, usage_of
from ctxproxy.wire.anthropic.tool_blocks import TOOL_USE, final_message, split_uses
from ctxproxy.wire.anthropic.tool_rounds import MessageRounds
from ctxproxy.wire.anthropic.tool_stream import RoundEnd, RoundEvents, closing_events, event_bytes
from ctxproxy.wire.item_loop import ItemLoop

__all__ = ["MESSAGES_STREAM", "MessagesDialect", "MessagesStream", "forward_with_tools"]


async def forward_with_tools(
    loop: ItemLoop, body: dict[str, Any], stream: bool, ctx_headers: Mapping[str, str], budget: Budget
) -> Relayed | Overflow:
    """Forward ``body`` (compacted, our tools in its ``tools``) and answer our calls; see the module.

    ``budget``: the model's window and the forwarded prompt's tokens."""
    dialect = MessagesDialect(loop, MessageRounds(loop, body, budget))
    answer = await (stream_rounds(dialect, ctx_headers) if stream else json_rounds(dialect, ctx_headers))
    if isinstance(answer, Overflow):
        return answer
    return relayed(answer, usage_of(dialect.rounds.first_usage) or Usage())


class MessagesStream:
    """A Messages stream, as the loop's rounds are relayed (``ctxproxy.tools.round_io.StreamShape``)."""

    events: EventKinds = MESSAGES_EVENTS

    def framer(self) -> EventFramer:
        return MessagesFramer()

    def failure(self, error: ProxyError) -> bytes:
        return error_event(error)

    def error_answer(self, status: int, raw: bytes) -> bytes:
        """A later round's HTTP error answer as an ``error`` event (the status line has gone): its
        error object when it is Anthropic's, else one naming the status."""
        error = error_object(raw)
        if error is not None:
            return event_bytes("error", orjson.dumps({"type": "error", "error": error}))
        return error_event(round_failed(status))


MESSAGES_STREAM = MessagesStream()


@dataclass(frozen=True)
class MessagesDialect(RoundsDialect):
    """The Messages API's shapes for one request's loop (``ctxproxy.tools.driver.ToolDialect``)."""

    loop: ItemLoop
    rounds: MessageRounds
    stream_shape: MessagesStream = MESSAGES_STREAM

    @property
    def log_fields(self) -> dict[str, Any]:
        return self.request[LOG_FIELDS]

    def read(self, answer: Mapping[str, Any]) -> RoundRead | None:
        content = answer.get("content")
        if not isinstance(content, list):
            return None  # not a message
        calls, client_calls = split_uses(content, self.loop.tools)
        usage = answer.get("usage")
        complete = answer.get("stop_reason") == TOOL_USE
        return RoundRead(calls, client_calls, complete, content, usage if isinstance(usage, Mapping) else None)

    def final(self, answer: Mapping[str, Any]) -> dict[str, Any]:
        return final_message(answer, self.loop.tools, self.rounds.usage, self.rounds.earlier)

    def feed(self, previous: RoundEnd | None) -> RoundFeed[RoundEnd]:
        offset = previous.shown if previous is not None else 0
        return RoundEvents(self.loop.tools, offset=offset, first=previous is None)

    def closing(self, last: RoundEnd) -> bytes:
        if last.error:
            return b""  # the upstream's error event ended the stream
        return closing_events(last, self.rounds.usage, pristine=self.rounds.rounds == 0 and not last.calls)

    def truncated(self) -> bytes:
        return error_event(UpstreamError(TRUNCATED))

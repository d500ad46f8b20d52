"""ctxproxy's tools for Responses clients: ``ctxproxy.tools.driver``'s one loop in the Responses API's shapes.

Round 1 is the forwarded body with our tools after the client's (``tools``). While a response is
``completed`` and every call in its output is ours, ctxproxy answers the calls (within the window,
``ctxproxy.tools.progress.Answering``), appends the round's output items and one
``function_call_output`` per call to ``input`` and posts again — at most ``[tools] max_rounds``
rounds; the round after the last carries ``tool_choice: "none"`` (``tool_rounds``).

The client gets one response: what every earlier round showed (its items but our calls and the
reasoning that led to them), then the final output without our calls, and the usage summed over
every round (``tool_items.final_response``), and (JSON only) ``X-Ctx-Tool-Rounds``. A response that
calls the client's tools too goes to the client, ours taken out. Streamed, every round is relayed
as it is generated (``tool_stream``): one ``response.created``, our items never, the items numbered
across the rounds, and one terminal event carrying round 1's response id, every shown item and the
summed usage. A failure ends the stream with one ``error`` event (``ResponsesStream``): the
upstream's own, one saying what failed (a later round refused, a transport failure, a later
round's HTTP error, whose error is kept when it is OpenAI's), or ``stream.TRUNCATED``.

Round 1's ``usage.input_tokens`` is the prompt the pipeline counted: the answer teaches it how the
upstream counts, as a direct answer's does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxproxy.errors import ProxyError, UpstreamError
from ctxproxy.pipeline.wire import Relayed
from ctxproxy.services import LOG_FIELDS
from ctxproxy.tools.budget import Budget
from ctxproxy.tools.calls import json_object
from ctxproxy.tools.driver import RoundRead, RoundsDialect, json_rounds, stream_rounds
from ctxproxy.tools.round_io import RoundFeed
from ctxproxy.upstream.opening import EventKinds
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.upstream.sse import EventFramer
from ctxproxy.wire.item_loop import ItemLoop
from ctxproxy.wire.openai_responses.forward import relayed
from ctxproxy.wire.openai_responses.stream import (
    RESPONSES_EVENTS,
    TRUNCATED,
    TRUNCATED_CODE,
    ResponsesFramer,
    error_event,
)
from ctxproxy.wire.openai_responses.tool_items import final_response, split_calls
from ctxproxy.wire.openai_responses.tool_rounds import ResponseRounds, first_payload
from ctxproxy.wire.openai_responses.tool_stream import RoundEnd, RoundItems, Sequence, closing_event

__all__ = ["ResponsesDialect", "ResponsesStream", "forward_with_tools"]


async def forward_with_tools(
    loop: ItemLoop, body: dict[str, Any], stream: bool, ctx_headers: Mapping[str, str], budget: Budget
) -> Relayed | Overflow:
    """Forward ``body`` (compacted, our tools in its ``tools``) and answer our calls; see the module."""
    dialect = ResponsesDialect(loop, ResponseRounds(loop, first_payload(body), budget))
    answer = await (stream_rounds(dialect, ctx_headers) if stream else json_rounds(dialect, ctx_headers))
    return answer if isinstance(answer, Overflow) else relayed(answer, dialect.rounds.first_prompt)


@dataclass
class ResponsesStream:
    """A Responses stream, as the loop's rounds are relayed (``ctxproxy.tools.round_io.StreamShape``);
    its errors are numbered after the last event the client saw."""

    sequence: Sequence
    events: EventKinds = RESPONSES_EVENTS

    def framer(self) -> EventFramer:
        return ResponsesFramer()

    def failure(self, error: ProxyError) -> bytes:
        number, self.sequence.next = self.sequence.next, self.sequence.next + 1
        return error_event(error, number)

    def error_answer(self, status: int, raw: bytes) -> bytes:
        """A later round's HTTP error answer as an ``error`` event: its message and code when it is
        OpenAI's error object, else one naming the status."""
        parsed = json_object(raw)
        error = parsed.get("error") if parsed is not None else None
        message = error.get("message") if isinstance(error, Mapping) else None
        if isinstance(message, str):
            code = error.get("code") if isinstance(error, Mapping) else None
            return self.failure(UpstreamError(message, code=code if isinstance(code, str) else None))
        return self.failure(UpstreamError(f"The upstream answered HTTP {status} to a proxy tool round."))


@dataclass
class ResponsesDialect(RoundsDialect):
    """The Responses API's shapes for one request's loop (``ctxproxy.tools.driver.ToolDialect``)."""

    loop: ItemLoop
    rounds: ResponseRounds
    sequence: Sequence = field(default_factory=Sequence)

    @property
    def stream_shape(self) -> ResponsesStream:
        return ResponsesStream(self.sequence)

    @property
    def log_fields(self) -> dict[str, Any]:
        return self.request[LOG_FIELDS]

    def read(self, answer: Mapping[str, Any]) -> RoundRead | None:
        output = answer.get("output")
        if not isinstance(output, list):
            return None  # not a response
        calls, client_calls = split_calls(output, self.loop.tools)
        usage = answer.get("usage")
        complete = answer.get("status") == "completed"
        return RoundRead(calls, client_calls, complete, output, usage if isinstance(usage, Mapping) else None)

    def final(self, answer: Mapping[str, Any]) -> dict[str, Any]:
        return final_response(answer, self.loop.tools, self.rounds.usage, self.rounds.earlier)

    def feed(self, previous: RoundEnd | None) -> RoundFeed[RoundEnd]:
        if previous is None:
            return RoundItems(self.loop.tools, self.sequence, offset=0, first=True)
        return RoundItems(
            self.loop.tools, self.sequence, offset=previous.shown, first=False, response_id=previous.response_id
        )

    def closing(self, last: RoundEnd) -> bytes:
        if last.error:
            return b""  # the upstream's error event ended the stream
        if self.rounds.rounds == 0 and not last.calls:
            return last.held  # the upstream's own terminal event
        return closing_event(last, self.loop.tools, self.sequence, self.rounds.usage, self.rounds.earlier)

    def truncated(self) -> bytes:
        return self.stream_shape.failure(UpstreamError(TRUNCATED, code=TRUNCATED_CODE))

"""ctxproxy's tools for Gemini clients: ``ctxproxy.tools.driver``'s one loop in Gemini's shapes.

Round 1 is the forwarded body with our function declarations after the client's tools (``tools``).
While an answer's first candidate finished (``STOP``) and every call in it is ours, ctxproxy
answers the calls (within the window, ``ctxproxy.tools.progress.Answering``), appends the round's
``model`` content and a ``user`` content of responses to ``contents`` and posts again — at most
``[tools] max_rounds`` rounds; the round after the last has function calling turned off
(``tool_rounds``).

The client gets one answer: what every earlier round showed (its parts but our calls), then the
final parts without our calls, and the usage summed over every round (``tool_parts.final_answer``),
and (JSON only) ``X-Ctx-Tool-Rounds``. An answer that calls the client's functions too goes to the
client, ours taken out. Streamed, every round is relayed as it is generated (``tool_stream``), and
one closing chunk carries the finish and the summed usage. A failure ends the stream with one
error event in Google's shape: the upstream's own, or one saying what failed (a later round
refused, a transport failure, a later round's HTTP error, whose error is kept when it is Google's),
or ``stream.TRUNCATED``.

Round 1's ``usageMetadata`` is the prompt the pipeline counted: the answer teaches it how the
model counts, as a direct answer's does.
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
from ctxproxy.wire.gemini.errors import error_event
from ctxproxy.wire.gemini.fields import field
from ctxproxy.wire.gemini.forward import relayed
from ctxproxy.wire.gemini.stream import GEMINI_EVENTS, TRUNCATED, Usage, usage_of
from ctxproxy.wire.gemini.tool_parts import final_answer, first_parts, split_calls
from ctxproxy.wire.gemini.tool_rounds import GeminiRounds
from ctxproxy.wire.gemini.tool_stream import STOP, RoundChunks, RoundEnd, closing_event
from ctxproxy.wire.item_loop import ItemLoop

__all__ = ["GeminiDialect", "GeminiStream", "forward_with_tools"]


async def forward_with_tools(
    loop: ItemLoop, body: dict[str, Any], stream: bool, ctx_headers: Mapping[str, str], budget: Budget
) -> Relayed | Overflow:
    """Forward ``body`` (compacted, our declarations in its ``tools``) and answer our calls."""
    dialect = GeminiDialect(loop, GeminiRounds(loop, body, budget))
    answer = await (stream_rounds(dialect, ctx_headers) if stream else json_rounds(dialect, ctx_headers))
    if isinstance(answer, Overflow):
        return answer
    return relayed(answer, usage_of({"usageMetadata": dialect.rounds.first_usage}) or Usage())


@dataclass(frozen=True)
class GeminiStream:
    """A Gemini stream, as the loop's rounds are relayed (``ctxproxy.tools.round_io.StreamShape``)."""

    events: EventKinds = GEMINI_EVENTS

    def framer(self) -> EventFramer:
        return EventFramer()

    def failure(self, error: ProxyError) -> bytes:
        return error_event(error)

    def error_answer(self, status: int, raw: bytes) -> bytes:
        """A later round's HTTP error answer as an error event: Google's error object as it came,
        else one naming the status."""
        error = error_object(raw)
        if error is not None and isinstance(error.get("message"), str):
            return b"data: " + orjson.dumps({"error": error}) + b"\r\n\r\n"
        return self.failure(round_failed(status))


GEMINI_STREAM = GeminiStream()


@dataclass
class GeminiDialect(RoundsDialect):
    """Gemini's shapes for one request's loop (``ctxproxy.tools.driver.ToolDialect``)."""

    loop: ItemLoop
    rounds: GeminiRounds
    stream_shape: GeminiStream = GEMINI_STREAM

    @property
    def log_fields(self) -> dict[str, Any]:
        return self.request[LOG_FIELDS]

    def read(self, answer: Mapping[str, Any]) -> RoundRead | None:
        parts = first_parts(answer)
        candidates = answer.get("candidates")
        if parts is None or not isinstance(candidates, list) or not candidates:
            return None  # no candidate: a blocked prompt, not an answer of the model's
        calls, client_calls = split_calls(parts, self.loop.tools)
        first = candidates[0] if isinstance(candidates[0], Mapping) else {}
        complete = field(first, "finishReason") == STOP
        usage = field(answer, "usageMetadata")
        return RoundRead(calls, client_calls, complete, parts, usage if isinstance(usage, Mapping) else None)

    def final(self, answer: Mapping[str, Any]) -> dict[str, Any]:
        return final_answer(answer, self.loop.tools, self.rounds.usage, self.rounds.earlier)

    def feed(self, previous: RoundEnd | None) -> RoundFeed[RoundEnd]:
        return RoundChunks(self.loop.tools)

    def closing(self, last: RoundEnd) -> bytes:
        if last.error:
            return b""  # the upstream's error event ended the stream
        return closing_event(last, self.rounds.usage, pristine=self.rounds.rounds == 0 and not last.calls)

    def truncated(self) -> bytes:
        return error_event(UpstreamError(TRUNCATED))

"""The streaming side of the Messages tool loop: one client stream fed by successive upstream rounds.

The client's response starts when round 1's opening is known not to be an overflow (an ``error``
event saying the prompt is too long, after ``message_start`` and ``ping`` only, returns
``Overflow``, nothing sent: ``ctxproxy.upstream.opening``, ``relay.MESSAGES_EVENTS``; a later
round's is retried with the answers withdrawn). Every round is relayed as it is generated through
a ``tool_stream.RoundEvents`` (our calls taken out, blocks numbered across the rounds); a round
that goes on to answer our calls has its ``message_delta`` and ``message_stop`` held back, later
rounds' ``message_start`` is not relayed, and the last round's ``message_delta`` carries the usage
summed over every round, then ``message_stop``.

However a round fails, the client's stream ends with one ``error`` event (as ``relay.MessagesEnd``
ends a plain relay): the upstream's own when it sent one; one saying what failed (a later round
refused — as ``invalid_request_error`` when it did not fit even with the answers withdrawn —, a
transport failure, an HTTP error answer to a later round, whose error object is kept when it is
one); or ``relay.TRUNCATED`` when a round's stream ended before its ``message_stop``. Calls of a
round that did not complete are not answered. Posting and relaying rounds is shared with chat
completions (``ctxproxy.tools.round_io``); ``MessagesStream`` says what a Messages stream is.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import aiohttp
import orjson
import structlog

from ctxproxy.errors import ProxyError, UpstreamError
from ctxproxy.pipeline.wire import Relayed
from ctxproxy.services import LOG_FIELDS
from ctxproxy.tools.calls import json_object
from ctxproxy.tools.progress import log_done
from ctxproxy.tools.round_io import RoundsStream, first_round, is_event_stream
from ctxproxy.upstream.opening import EventKinds
from ctxproxy.upstream.overflow import Overflow, is_context_overflow
from ctxproxy.upstream.overflow_numbers import overflow_numbers
from ctxproxy.upstream.relay import relay_body
from ctxproxy.upstream.sse import EventFramer
from ctxproxy.wire.anthropic.errors import error_event
from ctxproxy.wire.anthropic.forward import relayed
from ctxproxy.wire.anthropic.relay import MESSAGES_EVENTS, TRUNCATED, MessagesFramer
from ctxproxy.wire.anthropic.tool_blocks import final_message
from ctxproxy.wire.anthropic.tool_rounds import MessageRounds, MessagesLoop
from ctxproxy.wire.anthropic.tool_stream import RoundEnd, RoundEvents, closing_events, event_bytes

__all__ = ["MESSAGES_STREAM", "MessagesStream", "stream_rounds"]

log = structlog.get_logger(__name__)


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
        parsed = json_object(raw)
        error = parsed.get("error") if parsed is not None else None
        if isinstance(error, Mapping):
            return event_bytes("error", orjson.dumps({"type": "error", "error": error}))
        return error_event(UpstreamError(f"The upstream answered HTTP {status} to a proxy tool round."))


MESSAGES_STREAM = MessagesStream()


async def stream_rounds(
    loop: MessagesLoop, rounds: MessageRounds, ctx_headers: Mapping[str, str]
) -> Relayed | Overflow:
    """Round 1 and every later one, streamed; ``Overflow`` when round 1 was refused as too long."""
    async with loop.post(rounds.payload) as up:
        loop.request[LOG_FIELDS]["upstream_status"] = up.status
        if not is_event_stream(up):
            return await _not_streamed(loop, up, ctx_headers)
        feed = RoundEvents(loop.tools, offset=0, first=True)
        opened = await first_round(loop.request, up, loop.port, MESSAGES_STREAM, ctx_headers, feed)
        if isinstance(opened, Overflow):
            return opened
        stream, end = opened
    await _continue(loop, stream, end, rounds)
    return relayed(stream.response, rounds.first_usage)


async def _not_streamed(
    loop: MessagesLoop, up: aiohttp.ClientResponse, ctx_headers: Mapping[str, str]
) -> Relayed | Overflow:
    """Round 1 answered with an error, or with JSON although a stream was asked for: relayed as it
    came (our calls taken out of a message), or ``Overflow``."""
    raw = await loop.port.read(up)
    if up.status >= 400 and is_context_overflow(up.status, raw):
        return Overflow(overflow_numbers(raw))
    answer = json_object(raw) if up.status == 200 else None
    if answer is not None and isinstance(answer.get("content"), list):
        usage = answer.get("usage")
        raw = orjson.dumps(final_message(answer, loop.tools, usage if isinstance(usage, Mapping) else None))
    log_done(0, True, f"upstream_{up.status}")
    return Relayed(await relay_body(up, raw, ctx_headers))


async def _continue(
    loop: MessagesLoop, stream: RoundsStream[RoundEnd], end: RoundEnd | None, rounds: MessageRounds
) -> None:
    """Answer our calls and relay the next round while the model calls ours only; then end the stream."""
    while end is not None:
        rounds.add_usage(end.usage)
        if end.error or not end.done or not rounds.wants(end.calls, end.client_calls, end.stop_reason):
            await stream.close(_closing(end, rounds))
            return
        await rounds.answer(end.content, end.calls)
        feed = partial(RoundEvents, loop.tools, offset=end.shown, first=False)
        end = await stream.next_round(loop.post, rounds, feed)
    log_done(rounds.rounds, True, "interrupted")  # the client left, or the upstream failed (reported)


def _closing(end: RoundEnd, rounds: MessageRounds) -> bytes:
    """How the client's stream ends after the last round: its held events with the summed usage;
    nothing more after an error event the upstream sent; else the error saying it was cut short."""
    if end.error:
        log_done(rounds.rounds, True, "error_event")
        return b""
    if end.done:
        log_done(rounds.rounds, True, "answered")
        return closing_events(end, rounds.usage, pristine=rounds.rounds == 0 and not end.calls)
    log.warning("upstream.stream_truncated", tool_rounds=rounds.rounds)
    log_done(rounds.rounds, True, "truncated")
    return error_event(UpstreamError(TRUNCATED))

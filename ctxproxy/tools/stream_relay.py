"""The streaming side of the tool loop: one client stream fed by successive upstream rounds.

The client's response starts when round 1's opening is known not to be a context overflow (an
overflow error event before its first content is one: ``ctxproxy.upstream.opening``; so is a
later round's, which is retried with the answers withdrawn). Every round is relayed through a
``RoundFilter`` into the same response, so content is streamed as it is generated, in every
round; a non-final round's finish and usage chunks are dropped; the last round's finish chunk is
followed by the summed usage (when the client asked for it) and ``[DONE]``.

The client's stream always ends with ``[DONE]``, as a plain relay's does (``ctxproxy.upstream.sse``):
after an error event of the upstream's; after an error event saying what failed (a later round
refused, a transport failure); or, when a round's stream ended without its ``[DONE]`` (closed
early, at an event boundary or in the middle of an event), after an error event saying it ended
before it was complete. Calls of a round that did not complete are not answered.

Posting, relaying and failing rounds is shared with every protocol's loop (``round_io``); this
module says what a chat completions stream is (``ChatStream``) and how the client's stream ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import structlog
from aiohttp import web

from ctxproxy.errors import ProxyError, UpstreamError
from ctxproxy.tools.calls import add_usage, as_mapping, final_answer, json_object
from ctxproxy.tools.progress import log_done
from ctxproxy.tools.round_io import RoundsStream, first_round, is_event_stream
from ctxproxy.tools.rounds import Loop, Rounds
from ctxproxy.tools.stream import RoundFilter, RoundResult, closing_events
from ctxproxy.upstream.opening import EventKinds
from ctxproxy.upstream.overflow import Overflow, is_context_overflow
from ctxproxy.upstream.overflow_numbers import overflow_numbers
from ctxproxy.upstream.relay import relay_body
from ctxproxy.upstream.sse import CHAT_EVENTS, DONE, EventFramer, failure_event, sse_event, truncated_event

log = structlog.get_logger(__name__)


class ChatStream:
    """A chat completions stream, as the loop's rounds are relayed (``round_io.StreamShape``)."""

    events: EventKinds = CHAT_EVENTS

    def framer(self) -> EventFramer:
        return EventFramer()

    def failure(self, error: ProxyError) -> bytes:
        return failure_event(error) + DONE

    def error_answer(self, status: int, raw: bytes) -> bytes:
        """A later round's HTTP error answer as an SSE error event (the status line has gone)."""
        parsed = json_object(raw)
        if parsed is not None and isinstance(parsed.get("error"), Mapping):
            return sse_event(orjson.dumps({"error": parsed["error"]})) + DONE
        return self.failure(UpstreamError(f"The upstream answered HTTP {status} to a proxy tool round."))


CHAT_STREAM = ChatStream()


async def stream_rounds(
    loop: Loop, rounds: Rounds, ctx_headers: Mapping[str, str], include_usage: bool
) -> web.StreamResponse | Overflow:
    """Round 1 and every later one, streamed; ``Overflow()`` when round 1 was refused as too long
    (nothing sent)."""
    async with loop.post(rounds.payload) as up:
        if not is_event_stream(up):
            raw = await loop.port.read(up)
            if up.status >= 400 and is_context_overflow(up.status, raw):
                return Overflow(overflow_numbers(raw))
            answer = json_object(raw) if up.status == 200 else None
            if answer is not None:  # the upstream ignored "stream": still no call of ours may pass
                raw = orjson.dumps(final_answer(answer, loop.tools, as_mapping(answer.get("usage"))))
            log_done(0, True, f"upstream_{up.status}")
            return await relay_body(up, raw, ctx_headers)
        opened = await first_round(
            loop.request, up, loop.port, CHAT_STREAM, ctx_headers, round_filter(loop, None, rounds)
        )
        if isinstance(opened, Overflow):
            return opened
        stream, result = opened
    await StreamRelay(loop, stream).continue_rounds(result, rounds, include_usage)
    return stream.response


def round_filter(loop: Loop, completion_id: str | None, rounds: Rounds) -> RoundFilter:
    return RoundFilter(
        loop.tools,
        completion_id,
        client_names=loop.client_names,
        lead=rounds.lead,
        reasoning_lead=rounds.reasoning_lead,
    )


class StreamRelay:
    """What follows round 1: the later rounds, and how the client's stream ends."""

    def __init__(self, loop: Loop, stream: RoundsStream[RoundResult]) -> None:
        self._loop = loop
        self._stream = stream

    async def continue_rounds(self, result: RoundResult | None, rounds: Rounds, include_usage: bool) -> None:
        usage: Mapping[str, Any] | None = None
        completion_id = result.completion_id if result is not None else None
        while result is not None:
            usage = add_usage(usage, result.usage)
            rounds.shown(result.content, result.reasoning)
            if not self._answers_wanted(result, rounds):
                await self._stream.close(self._closing(result, usage, include_usage, rounds.rounds))
                return
            await rounds.answer(result.content, result.proxy_calls, result.reasoning)
            result = await self._stream.next_round(
                self._loop.post, rounds, lambda: round_filter(self._loop, completion_id, rounds)
            )
        log_done(rounds.rounds, True, "interrupted")  # the client left, or the upstream failed (reported)

    @staticmethod
    def _answers_wanted(result: RoundResult, rounds: Rounds) -> bool:
        """A round that ended cleanly and completely with calls of ours only, while rounds remain."""
        if result.error or not result.done or result.finish_reason is None:
            return False
        return rounds.wants(result.proxy_calls, result.client_calls, result.finish_reason)

    @staticmethod
    def _closing(result: RoundResult, usage: Mapping[str, Any] | None, include_usage: bool, rounds: int) -> bytes:
        """How the client's stream ends after the last round: its finish and usage, or the error
        saying the round ended before it was complete; then ``[DONE]``."""
        if result.error or result.done:
            log_done(rounds, True, "error_event" if result.error else "answered")
            return closing_events(result, usage, include_usage, rounds) + DONE
        log.warning("upstream.stream_truncated", tool_rounds=rounds)
        log_done(rounds, True, "truncated")
        return truncated_event() + DONE

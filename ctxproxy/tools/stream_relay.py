"""The streaming side of the tool loop: one client stream fed by successive upstream rounds.

The client's response starts when round 1's first events are known not to be a context overflow.
Every round is relayed through a ``RoundFilter`` into the same response, so content is streamed as
it is generated, in every round; a non-final round's finish and usage chunks are dropped; the last
round's finish chunk is followed by the summed usage (when the client asked for it) and ``[DONE]``.

The client's stream always ends with ``[DONE]``, as a plain relay's does (``ctxproxy.upstream.sse``):
after an error event of the upstream's; after an error event saying what failed (a later round
refused, a transport failure); or, when a round's stream ended without its ``[DONE]`` (closed
early, at an event boundary or in the middle of an event), after an error event saying it ended
before it was complete. Calls of a round that did not complete are not answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

import aiohttp
import orjson
import structlog
from aiohttp import web

from ctxproxy.errors import ContextLengthExceeded, ProxyError, UpstreamError
from ctxproxy.tools.calls import add_usage, as_mapping, final_answer, json_object
from ctxproxy.tools.progress import LATER_OVERFLOW, log_done
from ctxproxy.tools.rounds import Loop, Rounds
from ctxproxy.tools.stream import RoundFilter, RoundResult, closing_events
from ctxproxy.upstream.client import TRANSPORT_ERRORS, translate
from ctxproxy.upstream.headers import client_response_headers
from ctxproxy.upstream.overflow import Overflow, is_context_overflow, sse_error_is_overflow
from ctxproxy.upstream.overflow_numbers import overflow_numbers
from ctxproxy.upstream.relay import finish, first_events, relay_body, send
from ctxproxy.upstream.sse import DONE, EventFramer, event_payloads, failure_event, sse_event, truncated_event

log = structlog.get_logger(__name__)


async def stream_rounds(
    loop: Loop, rounds: Rounds, ctx_headers: Mapping[str, str], include_usage: bool
) -> web.StreamResponse | Overflow:
    """Round 1 and every later one, streamed; ``Overflow()`` when round 1 was refused as too long
    (nothing sent)."""
    async with loop.post(rounds.payload) as up:
        if up.status != 200 or up.content_type != "text/event-stream":
            raw = await loop.port.read(up)
            if up.status >= 400 and is_context_overflow(up.status, raw):
                return Overflow(overflow_numbers(raw))
            answer = json_object(raw) if up.status == 200 else None
            if answer is not None:  # the upstream ignored "stream": still no call of ours may pass
                raw = orjson.dumps(final_answer(answer, loop.tools, as_mapping(answer.get("usage"))))
            log_done(0, True, f"upstream_{up.status}")
            return await relay_body(up, raw, ctx_headers)
        framer = EventFramer()
        with loop.port.errors():
            first = await first_events(up, framer)
        refusal = next((data for data in event_payloads(first) if sse_error_is_overflow(data)), None)
        if refusal is not None:
            return Overflow(overflow_numbers(refusal))
        headers = client_response_headers(up.headers, body_decoded=True)
        headers.update(ctx_headers)
        response = web.StreamResponse(status=200, headers=headers)
        await response.prepare(loop.request)
        relay = StreamRelay(loop, response)
        result = await relay.pump(up, relay.round_filter(None, rounds), first, framer)
    await relay.continue_rounds(result, rounds, include_usage)
    return response


class StreamRelay:
    """One client stream fed by successive upstream rounds."""

    def __init__(self, loop: Loop, response: web.StreamResponse) -> None:
        self._loop = loop
        self._response = response

    def round_filter(self, completion_id: str | None, rounds: Rounds) -> RoundFilter:
        return RoundFilter(
            self._loop.tools,
            completion_id,
            client_names=self._loop.client_names,
            lead=rounds.lead,
            reasoning_lead=rounds.reasoning_lead,
        )

    async def continue_rounds(self, result: RoundResult | None, rounds: Rounds, include_usage: bool) -> None:
        usage: Mapping[str, Any] | None = None
        completion_id = result.completion_id if result is not None else None
        while result is not None:
            usage = add_usage(usage, result.usage)
            rounds.shown(result.content, result.reasoning)
            if not self._answers_wanted(result, rounds):
                await send(self._response, self._closing(result, usage, include_usage, rounds.rounds))
                await finish(self._response)
                return
            await rounds.answer(result.content, result.proxy_calls, result.reasoning)
            result = await self._round(rounds, completion_id)
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

    async def _round(self, rounds: Rounds, completion_id: str | None) -> RoundResult | None:
        """The next round, retried once with the answers withdrawn when it overflows."""
        outcome = await self._next_round(rounds, completion_id)
        if isinstance(outcome, Overflow) and rounds.withdraw():
            log.warning("tools.round_overflow", tool_rounds=rounds.rounds, retry="answers_withdrawn")
            outcome = await self._next_round(rounds, completion_id)
        if isinstance(outcome, Overflow):
            await self._fail(ContextLengthExceeded(LATER_OVERFLOW))
            return None
        return outcome

    async def _next_round(self, rounds: Rounds, completion_id: str | None) -> RoundResult | Overflow | None:
        """One later round relayed; ``Overflow()`` when the upstream refused it as too long (nothing
        of it was sent); None when it failed (reported) or the client left."""
        async with AsyncExitStack() as stack:
            try:
                up = await stack.enter_async_context(self._loop.post(rounds.payload))
            except ProxyError as exc:
                await self._fail(exc)
                return None
            framer = EventFramer()
            try:
                if up.status != 200 or up.content_type != "text/event-stream":
                    raw = await up.read()
                else:
                    first = await first_events(up, framer)
            except TRANSPORT_ERRORS as exc:
                await self._fail(translate(exc, self._loop.tenant.upstream))
                return None
            if up.status != 200 or up.content_type != "text/event-stream":
                if up.status >= 400 and is_context_overflow(up.status, raw):
                    return Overflow()
                await send(self._response, _error_from_body(up.status, raw) + DONE)
                await finish(self._response)
                return None
            if any(sse_error_is_overflow(data) for data in event_payloads(first)):
                return Overflow()
            return await self.pump(up, self.round_filter(completion_id, rounds), first, framer)

    async def pump(
        self, up: aiohttp.ClientResponse, flt: RoundFilter, first: bytes, framer: EventFramer
    ) -> RoundResult | None:
        """Relay one round until it ends; None when the client left or the upstream failed (reported).
        A transport failure after the round's ``[DONE]`` is only logged: the round is complete."""
        ready = first
        while True:
            for data in event_payloads(ready):
                out = flt.feed(data)
                if out and not await send(self._response, out):
                    log.info("client.disconnected_mid_stream")
                    return None
            try:
                chunk = await up.content.readany()
            except TRANSPORT_ERRORS as exc:
                log.warning("upstream.stream_failed", error=type(exc).__name__, detail=str(exc), complete=flt.done)
                if not flt.done:
                    await self._fail(translate(exc, self._loop.tenant.upstream))
                    return None
                chunk = b""
            if not chunk:
                rest = b"".join(flt.feed(data) for data in event_payloads(framer.end()))
                if not await send(self._response, rest + flt.end()):
                    return None
                return flt.result()
            ready = framer.feed(chunk)

    async def _fail(self, failure: ProxyError) -> None:
        await send(self._response, failure_event(failure) + DONE)
        await finish(self._response)


def _error_from_body(status: int, raw: bytes) -> bytes:
    """An upstream error answer of a later round, as an SSE error event (the status line has gone)."""
    parsed = json_object(raw)
    if parsed is not None and isinstance(parsed.get("error"), Mapping):
        return sse_event(orjson.dumps({"error": parsed["error"]}))
    return failure_event(UpstreamError(f"The upstream answered HTTP {status} to a proxy tool round."))

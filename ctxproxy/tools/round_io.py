"""The I/O of a proxy-tool loop's rounds, whatever the wire protocol.

- ``json_round``: post one round and read its answer. An answer that refuses the prompt as too long
  is ``Overflow`` in round 1 (nothing was sent: the pipeline compacts and retries); in a later
  round the round is sent once more with the loop's answers withdrawn (``Progress.withdraw``), and
  if that is refused too, ``ContextLengthExceeded(LATER_OVERFLOW)``.
- ``first_round``: round 1 of a stream — its opening read by the rule of
  ``ctxproxy.upstream.opening`` before the client's response starts, so that a stream refused as
  too long before any content is ``Overflow``; then relayed.
- ``RoundsStream``: the client's one stream; it relays each round through that round's
  ``RoundFeed`` (the protocol's filter, which keeps our calls out) and posts later rounds, each
  opened by the same rule, with the same withdrawal on an overflow (an HTTP error, or an error event
  before the round's first content). A failure — a transport error, an HTTP error answer to a later
  round, a later round refused twice — ends the client's stream with the protocol's failure events.

The protocol gives its ``StreamShape``: how its events are framed, what they are (for the opening
rule), and how a failure is told in its stream.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, Generic, Protocol, TypeVar

import structlog
from aiohttp import web

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.errors import ContextLengthExceeded, ProxyError, UpstreamError
from ctxproxy.tools.calls import json_object
from ctxproxy.tools.progress import LATER_OVERFLOW, Progress, log_done
from ctxproxy.upstream.client import TRANSPORT_ERRORS, translate
from ctxproxy.upstream.headers import client_response_headers
from ctxproxy.upstream.http1 import UpstreamResponse
from ctxproxy.upstream.idle import StreamRead
from ctxproxy.upstream.opening import EventKinds, open_stream
from ctxproxy.upstream.overflow import Overflow, is_context_overflow
from ctxproxy.upstream.overflow_numbers import overflow_numbers
from ctxproxy.upstream.port import UpstreamPort
from ctxproxy.upstream.relay import finish, next_chunk, send
from ctxproxy.upstream.sse import EventFramer

__all__ = [
    "Post",
    "RoundFeed",
    "RoundsStream",
    "StreamShape",
    "error_object",
    "first_round",
    "is_event_stream",
    "json_round",
    "round_failed",
]

log = structlog.get_logger(__name__)
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

Post = Callable[[Mapping[str, Any]], AbstractAsyncContextManager[UpstreamResponse]]
"""Posts one round's payload; the response is closed when the block ends."""


class RoundFeed(Protocol[R_co]):
    """One round's filter: fed its events, says what the client gets now and, at the end, the round."""

    @property
    def done(self) -> bool: ...  # the round's stream is complete (its end event arrived)

    def feed_events(self, events: bytes) -> bytes: ...  # complete events in, the client's bytes out

    def end(self) -> bytes: ...  # the response is over: what the filter still holds for the client

    def result(self) -> R_co: ...


class StreamShape(Protocol):
    """What a protocol's stream looks like to the loop."""

    @property
    def events(self) -> EventKinds: ...  # what its events are, for ``open_stream``

    def framer(self) -> EventFramer: ...

    def failure(self, error: ProxyError) -> bytes: ...  # the events ending a client's stream with ``error``

    def error_answer(self, status: int, raw: bytes) -> bytes: ...  # the same for an HTTP error answer


def error_object(raw: bytes) -> Mapping[str, Any] | None:
    """A later round's HTTP error answer's ``error`` object, for its protocol to relay; None
    when it has none."""
    parsed = json_object(raw)
    error = parsed.get("error") if parsed is not None else None
    return error if isinstance(error, Mapping) else None


def round_failed(status: int) -> UpstreamError:
    """What the client is told of a later round's HTTP error answer without an error object."""
    return UpstreamError(f"The upstream answered HTTP {status} to a proxy tool round.")


def is_event_stream(up: UpstreamResponse) -> bool:
    return up.status == 200 and up.content_type == "text/event-stream"


async def json_round(post: Post, port: UpstreamPort, rounds: Progress) -> tuple[UpstreamResponse, bytes] | Overflow:
    """The answer to ``rounds.payload`` (see the module): any answer but an overflow, to read or relay."""
    while True:
        async with post(rounds.payload) as up:
            raw = await port.read(up)
        if up.status < 400 or not is_context_overflow(up.status, raw):
            return up, raw
        if rounds.rounds == 0:
            return Overflow(overflow_numbers(raw))
        if not rounds.withdraw():
            log_done(rounds.rounds, False, "overflow")
            raise ContextLengthExceeded(LATER_OVERFLOW)
        log.warning("tools.round_overflow", tool_rounds=rounds.rounds, retry="answers_withdrawn")


async def first_round(
    request: web.Request,
    up: UpstreamResponse,
    port: UpstreamPort,
    shape: StreamShape,
    ctx_headers: Mapping[str, str],
    feed: RoundFeed[R],
) -> tuple[RoundsStream[R], R | None] | Overflow:
    """Round 1's stream (``up``, an event stream): ``Overflow`` when it is refused as too long before
    any content, else the client's stream, begun with ``up``'s headers and ``ctx_headers``, and the
    round relayed into it."""
    framer = shape.framer()
    read = StreamRead(up, port.upstream.read_timeout)
    try:
        with port.errors():
            first = await open_stream(read, framer, shape.events)
        if isinstance(first, Overflow):
            return first
        headers = client_response_headers(up.headers, body_decoded=True)
        headers.update(ctx_headers)
        response = web.StreamResponse(status=200, headers=headers)
        await response.prepare(request)
        stream: RoundsStream[R] = RoundsStream(response, port.upstream, shape)
        return stream, await stream.pump(up, feed, first, framer, read)
    finally:
        read.close()


class RoundsStream(Generic[R]):
    """The client's one stream, fed by successive upstream rounds."""

    def __init__(self, response: web.StreamResponse, upstream: UpstreamConfig, shape: StreamShape) -> None:
        self._response = response
        self._upstream = upstream
        self._shape = shape

    @property
    def response(self) -> web.StreamResponse:
        return self._response

    async def close(self, events: bytes) -> None:
        """End the client's stream with ``events``."""
        await send(self._response, events)
        await finish(self._response)

    async def fail(self, failure: ProxyError) -> None:
        await self.close(self._shape.failure(failure))

    async def next_round(self, post: Post, rounds: Progress, feed: Callable[[], RoundFeed[R]]) -> R | None:
        """The next round relayed, sent once more with the answers withdrawn when it overflows; None
        when it failed (the client's stream has ended) or the client left."""
        outcome = await self._attempt(post, rounds.payload, feed)
        if isinstance(outcome, Overflow) and rounds.withdraw():
            log.warning("tools.round_overflow", tool_rounds=rounds.rounds, retry="answers_withdrawn")
            outcome = await self._attempt(post, rounds.payload, feed)
        if isinstance(outcome, Overflow):
            await self.fail(ContextLengthExceeded(LATER_OVERFLOW))
            return None
        return outcome

    async def _attempt(
        self, post: Post, payload: Mapping[str, Any], feed: Callable[[], RoundFeed[R]]
    ) -> R | Overflow | None:
        """One later round; ``Overflow`` when it was refused as too long before any of it was sent."""
        async with AsyncExitStack() as stack:
            try:
                up = await stack.enter_async_context(post(payload))
            except ProxyError as exc:
                await self.fail(exc)
                return None
            framer = self._shape.framer()
            read = StreamRead(up, self._upstream.read_timeout) if is_event_stream(up) else None
            if read is not None:
                stack.callback(read.close)
            try:
                first = await open_stream(read, framer, self._shape.events) if read is not None else await up.read()
            except TRANSPORT_ERRORS as exc:
                await self.fail(translate(exc, self._upstream))
                return None
            if isinstance(first, Overflow):
                return first
            if read is None:
                if up.status >= 400 and is_context_overflow(up.status, first):
                    return Overflow()
                await self.close(self._shape.error_answer(up.status, first))
                return None
            return await self.pump(up, feed(), first, framer, read)

    async def pump(
        self, up: UpstreamResponse, feed: RoundFeed[R], first: bytes, framer: EventFramer, read: StreamRead
    ) -> R | None:
        """Relay one round until it ends (``read`` reads ``up``'s body); None when the client left or
        the upstream failed (reported). A transport failure after the round is complete is only logged."""
        ready = first
        while True:
            out = feed.feed_events(ready)
            if out and not await send(self._response, out):
                log.info("client.disconnected_mid_stream")
                return None
            chunk = await next_chunk(up, self._upstream, complete=feed.done, content=read)
            if isinstance(chunk, ProxyError):
                if not feed.done:
                    await self.fail(chunk)
                    return None
                chunk = b""
            if not chunk:
                if not await send(self._response, feed.feed_events(framer.end()) + feed.end()):
                    return None
                return feed.result()
            ready = framer.feed(chunk)

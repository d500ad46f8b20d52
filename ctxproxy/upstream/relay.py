"""Relaying an upstream answer to the client.

- ``relay_body``: read the whole (non-streaming) answer, send it with its status and headers.
- ``relay_events``: an SSE chat stream, forwarded as it arrives: each read's complete events in
  one write, at once (several events in one read are one write, never held for the next read).
  It always ends with ``[DONE]``: a failure of the upstream after the first byte, or a stream
  that ends before its ``[DONE]``, first becomes an OpenAI-shaped error event
  (``sse.StreamEnd``). Another protocol's stream ends its own way: its ``Ending`` (and
  ``EventFramer``) are passed in. When the upstream's stream is already over after a read, that
  read's events, the ending and the response's end go out in one write.
- ``next_chunk``: a stream's next bytes, or what its transport failure means to the client
  (``stream_failure``, logged); the tool loops read with it, ``relay_events`` reads inline.
- ``relay_bytes``: any other response, streamed chunk by chunk, still encoded. A failure after
  the first byte aborts the connection, so the client sees a truncated body, not a complete one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, Protocol, TypeVar

import structlog
from aiohttp import web

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.errors import ProxyError
from ctxproxy.upstream.client import TRANSPORT_ERRORS, translate
from ctxproxy.upstream.headers import client_response_headers
from ctxproxy.upstream.http1 import AnyResponse, UpstreamResponse
from ctxproxy.upstream.idle import Reads, StreamRead
from ctxproxy.upstream.sse import EventFramer, StreamEnd

log = structlog.get_logger(__name__)
U = TypeVar("U")


class Tap(Protocol):
    """Reads what an answer says as it is relayed (``usage.UsageTap`` reads a chat answer's usage)."""

    def events(self, ready: bytes) -> bytes: ...  # complete events on their way: what goes on

    def see_json(self, body: bytes) -> None: ...  # a JSON answer (status 200)


class AnswerUsage(Generic[U]):
    """The usage an answer reports: a JSON answer's (``of_json`` reads it from the bytes), else
    what its stream said (``streamed``: its ``Ending`` reads it as the events are relayed). Takes
    no event out (a ``Tap``)."""

    def __init__(self, of_json: Callable[[bytes], U], streamed: Callable[[], U]) -> None:
        self._of_json, self._streamed = of_json, streamed
        self._json: U | None = None

    def events(self, ready: bytes) -> bytes:
        return ready

    def see_json(self, body: bytes) -> None:
        self._json = self._of_json(body)

    @property
    def usage(self) -> U:
        return self._json if self._json is not None else self._streamed()


class Ending(Protocol):
    """Watches the events relayed; says what must follow when the upstream's stream is over
    (``sse.StreamEnd`` is the chat stream's)."""

    @property
    def done(self) -> bool: ...  # the stream is complete

    @property
    def failed(self) -> bool: ...  # the upstream sent an error event

    def see(self, events: bytes) -> None: ...

    def closing(self, failure: ProxyError | None = None) -> bytes: ...


async def relay_body(up: UpstreamResponse, body: bytes, extra: Mapping[str, str]) -> web.Response:
    headers = client_response_headers(up.headers, body_decoded=True)
    headers.update(extra)
    return web.Response(status=up.status, body=body, headers=headers)


async def relay_events(
    request: web.Request,
    up: UpstreamResponse,
    extra: Mapping[str, str],
    upstream: UpstreamConfig,
    *,
    first: bytes = b"",
    framer: EventFramer | None = None,
    tap: Tap | None = None,
    end: Ending | None = None,
    content: Reads | None = None,
) -> web.StreamResponse:
    """``first``: events already read (by ``opening.open_stream``) with ``framer``; ``tap`` reads
    what the stream reports (and may take events out: the usage chunk the client did not ask for); ``end``
    (a chat stream's ``StreamEnd`` by default) sees every event relayed; ``content``: what reads
    the body (``idle.StreamRead``; ``up.content`` by default). Each read's complete events go on
    at once, in one write; the last read's go in the response's last write, with its end."""
    headers = client_response_headers(up.headers, body_decoded=True)
    headers.update(extra)
    response = web.StreamResponse(status=up.status, headers=headers)
    await response.prepare(request)
    framer = framer or EventFramer()
    end = end if end is not None else StreamEnd()
    body = up.content if content is None else content
    ready = first
    while True:
        if ready:  # a read that completed no event has nothing to read or to write
            ready = ready if tap is None else tap.events(ready)
            end.see(ready)
        if body.at_eof() and body.exception() is None:  # the upstream's stream is over: the next read is b""
            await _close(request, response, ready, framer, tap, end)
            return response
        if ready:
            try:
                await response.write(ready)
            except ConnectionError:
                log.info("client.disconnected_mid_stream")
                return response
        try:
            chunk = await body.readany()
        except TRANSPORT_ERRORS as exc:
            await finish(response, end.closing(stream_failure(exc, upstream, complete=end.done)))
            return response
        if not chunk:
            await _close(request, response, b"", framer, tap, end)
            return response
        ready = framer.feed(chunk)


async def _close(
    request: web.Request, response: web.StreamResponse, ready: bytes, framer: EventFramer, tap: Tap | None, end: Ending
) -> None:
    """The upstream's stream is over: ``ready`` (its last events, seen), what ``framer`` held and
    the closing events go in the response's last write."""
    if ready and (request.transport is None or request.transport.is_closing()):
        log.info("client.disconnected_mid_stream")  # as writing ``ready`` alone would have found
        return
    rest = framer.end()
    if rest:
        rest = rest if tap is None else tap.events(rest)
        end.see(rest)
    if not end.done and not end.failed:
        log.warning("upstream.stream_truncated")
    try:
        await response.write_eof(ready + rest + end.closing())
    except ConnectionError:
        if ready:  # lost while its events were sent (a slow client's buffer drained)
            log.info("client.disconnected_mid_stream")


async def next_chunk(
    up: UpstreamResponse, upstream: UpstreamConfig, *, complete: bool, content: Reads | None = None
) -> bytes | ProxyError:
    """The stream's next bytes (``b""`` at its end), or the error a transport failure is to the
    client (``stream_failure``). ``content``: what reads the body (``up.content`` by default)."""
    try:
        return await (up.content if content is None else content).readany()
    except TRANSPORT_ERRORS as exc:
        return stream_failure(exc, upstream, complete=complete)


def stream_failure(exc: Exception, upstream: UpstreamConfig, *, complete: bool) -> ProxyError:
    """What a transport failure while reading a stream is to the client, logged with whether the
    stream was already ``complete``."""
    log.warning("upstream.stream_failed", error=type(exc).__name__, detail=str(exc), complete=complete)
    return translate(exc, upstream)


async def relay_bytes(request: web.Request, up: AnyResponse, read_timeout: float | None = None) -> web.StreamResponse:
    """``read_timeout``: the tenant's, kept by one timer for the body (``idle.StreamRead``)
    instead of aiohttp's timer restarted at every packet."""
    response = web.StreamResponse(status=up.status, headers=client_response_headers(up.headers, body_decoded=False))
    if up.content_length is not None and "Transfer-Encoding" not in up.headers:
        response.content_length = up.content_length
    await response.prepare(request)
    content = up.content if read_timeout is None else StreamRead(up, read_timeout)
    try:
        while chunk := await content.readany():
            await response.write(chunk)
    except TRANSPORT_ERRORS as exc:
        log.warning("upstream.body_failed", error=type(exc).__name__, detail=str(exc))
        if request.transport is not None:
            request.transport.abort()  # a truncated body must not look complete
        return response
    finally:
        if isinstance(content, StreamRead):
            content.close()
    await finish(response)
    return response


async def send(response: web.StreamResponse, data: bytes) -> bool:
    """Write to the client; False when the client has gone away."""
    if not data:
        return True
    try:
        await response.write(data)
    except ConnectionError:
        return False
    return True


async def finish(response: web.StreamResponse, last: bytes = b"") -> None:
    """End the response, ``last`` its last bytes (one write with the end), unless the client has gone away."""
    try:
        await response.write_eof(last)
    except ConnectionError:
        pass

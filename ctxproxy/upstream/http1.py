"""One HTTP/1.1 connection to an upstream: a request written in one go, its answer parsed.

The answer is parsed by aiohttp's own response parser (``HttpResponseParser``, the C one where it
is built): chunked, ``Content-Length`` and close-delimited bodies, content decoding, header
limits. Its body is the parser's ``aiohttp.StreamReader`` (``UpstreamResponse.content``), so
readers of a body are those of aiohttp's client. Failures are aiohttp's client errors, named as
aiohttp's client named them (``ctxproxy.upstream.client.failure_reason`` sorts them):
``ServerDisconnectedError`` / ``ClientOSError`` when the connection ends before the answer's
head, ``ClientPayloadError`` when it ends inside the body, ``SocketTimeoutError`` when a wait for
bytes lasts ``read_timeout``, ``ClientResponseError`` for an answer that is not HTTP.

``read_timeout`` is kept by one timer per connection that is re-armed only when it fires
(``ctxproxy.deadline``): each arrival of bytes, and each request, notes the time (no timer is
cancelled and made again per packet or per request). Time during which reading is paused because
the body's reader is full is not the upstream's, so it is not counted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import aiohttp
from aiohttp.base_protocol import BaseProtocol
from aiohttp.helpers import EMPTY_BODY_STATUS_CODES, parse_content_type
from aiohttp.http import HttpResponseParser, RawResponseMessage
from aiohttp.streams import EMPTY_PAYLOAD
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from ctxproxy.deadline import Deadline

__all__ = ["Answer", "AnyResponse", "Http1Connection", "UpstreamResponse"]

Answer = tuple[RawResponseMessage, aiohttp.StreamReader]
READ_BUFSIZE = 1 << 16  # bytes a body's reader holds before reading from the socket pauses


class Http1Connection(BaseProtocol):
    """A keep-alive connection: one request at a time (``send``), its answer as a future."""

    __slots__ = ("origin", "_answer", "_payload", "_busy", "_reusable", "read_timeout", "_timer", "_rested")

    def __init__(self, loop: asyncio.AbstractEventLoop, origin: tuple[str, str, int]) -> None:
        super().__init__(loop)
        self.origin = origin
        self._answer: asyncio.Future[Answer] | None = None
        self._payload: aiohttp.StreamReader | None = None
        self._busy = False  # a request was sent whose answer has not reached its end
        self._reusable = True
        self.read_timeout: float | None = None  # as aiohttp's protocol names it (``ctxproxy.upstream.idle``)
        # Held back while an answer's reader is full: the wait is ours, not the upstream's.
        self._timer = Deadline(loop, 0.0, self._timed_out, held=lambda: self._busy and self._reading_paused)
        self._rested = 0.0  # when it was last put back idle
        self._parser: Any = None  # the answers' parser

    @property
    def protocol(self) -> Http1Connection:
        """This connection, where ``ctxproxy.upstream.idle`` reaches a response's protocol."""
        return self

    def is_reusable(self) -> bool:
        """Open, and its last answer read to its end with nothing wrong on the way."""
        transport = self.transport
        if self._busy or not self._reusable or transport is None or transport.is_closing():
            return False
        return self._payload is None or self._payload.exception() is None

    def rest(self) -> None:
        """Note that it goes idle now."""
        self._rested = self._loop.time()

    def idle_for(self) -> float:
        return self._loop.time() - self._rested

    def send(self, buffers: Sequence[bytes | memoryview], read_timeout: float | None) -> asyncio.Future[Answer]:
        """Write the request (``buffers``, one ``write`` each); the future is its answer's head and
        body reader."""
        transport = self.transport
        if transport is None:
            raise aiohttp.ServerDisconnectedError()
        if self._parser is None:  # one a connection: it parses one answer after another, as a server's does
            self._parser = HttpResponseParser(
                self, self._loop, READ_BUFSIZE, payload_exception=aiohttp.ClientPayloadError, read_until_eof=True
            )
        self._payload = None
        self._busy = True
        answer = self._answer = self._loop.create_future()
        self.read_timeout = read_timeout
        self.start_timeout()
        for buffer in buffers:
            transport.write(buffer)
        return answer

    def start_timeout(self) -> None:
        """Start counting ``read_timeout`` from now (with none: stop counting). The timer left from
        an earlier request is kept (it re-arms itself) unless ``read_timeout`` changed."""
        seconds = self.read_timeout
        timer = self._timer
        if not seconds:
            timer.stop()
            return
        if seconds != timer.seconds:  # one that would fire late, or soon for nothing
            timer.stop()
            timer.seconds = seconds
        timer.note()

    def _timed_out(self) -> None:
        if not self._busy:
            return  # no answer awaited: the next request arms it again
        self._fail(aiohttp.SocketTimeoutError("Timeout on reading data from socket"))
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: BaseException) -> None:
        """``exc`` for whoever waits: the answer's head, else its body."""
        self._reusable = False
        self._timer.close()  # never used again (connection_lost comes here too)
        answer, payload = self._answer, self._payload
        if answer is not None and not answer.done():
            answer.set_exception(exc)
        elif payload is not None and not payload.is_eof() and payload.exception() is None:
            payload.set_exception(exc)

    def data_received(self, data: bytes) -> None:
        if data:  # b"": aiohttp's reader resuming a paused parse
            self._timer.since = self._loop.time()
        parser = self._parser
        if parser is None:
            if data:  # bytes nobody asked for: the connection is not trusted again
                self._reusable = False
            return
        try:
            messages, _, _ = parser.feed_data(data)
        except Exception as exc:
            self._parser = None
            self._fail(_bad_answer(exc, head=self._answer is not None and not self._answer.done()))
            if self.transport is not None:
                self.transport.close()
            return
        for message, payload in messages:
            self._answered(message, payload)

    def _answered(self, message: RawResponseMessage, payload: aiohttp.StreamReader) -> None:
        answer = self._answer
        if answer is None or answer.done():  # a second answer to one request
            self._reusable = False
            return
        if 100 <= message.code < 200 and message.code != 101:  # informational (103 Early Hints): the answer follows
            return
        if message.should_close:
            self._reusable = False
        if message.code in EMPTY_BODY_STATUS_CODES:
            payload = EMPTY_PAYLOAD
        self._payload = payload
        if payload.is_eof():
            self._ended()
        else:
            payload.on_eof(self._ended)
        answer.set_result((message, payload))

    def _ended(self) -> None:
        """The answer's body reached its end (its timer is left to fire idle, not cancelled)."""
        self._busy = False

    def eof_received(self) -> bool | None:
        return None  # close the transport: connection_lost ends what is left

    def connection_lost(self, exc: BaseException | None) -> None:
        parser = self._parser
        if parser is not None:
            try:
                parser.feed_eof()  # ends a close-delimited body; a short one raises
            except Exception as short:
                payload = self._payload
                if payload is not None and not payload.is_eof():
                    payload.set_exception(aiohttp.ClientPayloadError(f"Response payload is not completed: {short!r}"))
            self._parser = None  # after: the body's reader may still pause reading while it is fed
        if exc is None:
            self._fail(aiohttp.ServerDisconnectedError())
        else:
            self._fail(aiohttp.ClientOSError(*getattr(exc, "args", ())))
        super().connection_lost(exc)

    def close(self) -> None:
        self._reusable = False
        self._timer.stop()
        if self.transport is not None:
            self.transport.close()


def _bad_answer(exc: Exception, *, head: bool) -> aiohttp.ClientError:
    """What an answer that is not HTTP raises: in its head as aiohttp's client raised it, in its body
    as a broken body (the parser's reason, never the bytes: they are the upstream's)."""
    reason = f"Bad answer from the upstream ({type(exc).__name__})"
    if head:
        return aiohttp.ClientResponseError(_NO_REQUEST, (), message=reason)
    return aiohttp.ClientPayloadError(reason)


_NO_REQUEST = aiohttp.RequestInfo(URL(), "POST", CIMultiDictProxy(CIMultiDict()))  # immutable


class UpstreamResponse:
    """An upstream's answer: what ctxproxy reads of it (the part of ``aiohttp.ClientResponse`` it used)."""

    __slots__ = ("status", "reason", "headers", "content", "connection")

    def __init__(self, connection: Http1Connection, message: RawResponseMessage, content: aiohttp.StreamReader) -> None:
        self.status: int = message.code
        self.reason: str = message.reason
        self.headers: CIMultiDictProxy[str] = message.headers
        self.content = content
        self.connection: Http1Connection | None = connection

    @property
    def content_type(self) -> str:
        """The media type as aiohttp's client read it (``application/octet-stream`` when none is named)."""
        return _media_type(self.headers.get("Content-Type"))

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("Content-Length")
        return int(value) if value is not None and value.isdigit() else None

    @property
    def closed(self) -> bool:
        """Its connection went back to the pool (or was closed): the call's block ended."""
        return self.connection is None

    def release(self) -> Http1Connection:
        """The connection, taken from this response for the pool (once)."""
        connection = self.connection
        assert connection is not None, "released twice"
        self.connection = None
        return connection

    async def read(self) -> bytes:
        """The whole body."""
        return await self.content.read()


AnyResponse = UpstreamResponse | aiohttp.ClientResponse  # the passthrough routes relay aiohttp's client's


@lru_cache(maxsize=256)
def _media_type(raw: str | None) -> str:
    """aiohttp's reading of a ``Content-Type`` (an email header parser: slow, so kept per value)."""
    return "application/octet-stream" if raw is None else parse_content_type(raw)[0]

"""The HTTP/1.1 connection: aiohttp's ``RequestHandler`` with ctxproxy's answers to protocol trouble.

aiohttp answers a request its parser refuses by itself, before any middleware runs: a plain-text
400 quoting the offending bytes, and a traceback in the log quoting them again. It offers no hook
for this (aio-libs/aiohttp#3287), so ``ProxyRequestHandler`` overrides ``handle_error``: the
answer is a JSON error and the log line names the exception's type only. The parser's failure
comes without the request (aiohttp hands over a stand-in for ``GET /``), so the handler notes the
path of the newest request line it received: a refused request on a Messages path
(``/v1/messages…``) is answered in Anthropic's shape, any other in OpenAI's.

It also bounds how long a client may stall. Waiting for a request's headers is bounded by
aiohttp's own keep-alive timer (``keepalive_timeout``: from the connection's start or the end of
the previous response, however many bytes trickle in). Waiting for the rest of a body is bounded
like aiohttp's client bounds ``sock_read``: ``read_timeout`` after the last byte received, not
counted while flow control pauses reading (then the wait is ours, not the client's). It is kept
by one timer, not one restarted at every packet (a ``call_later`` and a ``cancel`` each, three a
request or more): a packet notes when it came, and the timer, when it fires, is re-armed for
``read_timeout`` after the newest one unless that time has come (``ctxproxy.deadline``, which
bounds an upstream's answer the same way). When it fires while a handler still expects body
bytes, the body fails with ``RequestTimeout``: a handler reading it answers 408, and the
connection is closed instead of lingering for the rest.

``ProxyServer`` makes these connections; ``ProxyAppRunner`` runs an app on one, with the timeouts
from ``[server]``. ``ctxproxy serve``, the demo and the tests' server all use it.

aiohttp internals this relies on (tests/server/test_protocol_errors.py and test_read_timeout.py
fail if they change): ``Server._loop`` / ``Server._kwargs`` (how ``Server.__call__`` builds a
connection) and ``RequestHandler._current_request`` (the request whose handler is running).
"""

from __future__ import annotations

import re
from typing import Any

import structlog
from aiohttp import web
from aiohttp.web_request import BaseRequest

from ctxproxy.deadline import Deadline
from ctxproxy.errors import RequestTimeout
from ctxproxy.server.protocol_errors import protocol_error
from ctxproxy.server.render import path_error_response
from ctxproxy.services import CONFIG

log = structlog.get_logger("ctxproxy.http")
_REQUEST_LINE = re.compile(rb"[A-Z]{1,20} (/[^ ?#\r\n]{0,2048})")  # at the start of a received chunk


class ProxyRequestHandler(web.RequestHandler):
    __slots__ = ("_read_timer", "_body_stalled", "_target_path")

    def __init__(self, manager: web.Server, *, read_timeout: float, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._read_timer = Deadline(self._loop, read_timeout, self._read_timed_out)  # not waiting while paused
        self._body_stalled = False
        self._target_path = "/"  # the path of the newest request line received (only to pick an error shape)

    def handle_error(
        self, request: BaseRequest, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        """The answer to a request the protocol layer failed (``message`` quotes raw bytes: unused)."""
        error = protocol_error(status, exc, max(self.max_line_size, self.max_field_size))
        if error.status >= 500:  # a failure of ours outside the middleware (e.g. a response hook)
            log.error("http.internal_error", status=error.status, exc_info=exc)
        else:
            log.warning(
                "http.protocol_error",
                status=error.status,
                error=type(exc).__name__,
                reason=error.code,
                remote=request.remote,
            )
        if request.writer.output_size > 0:
            raise ConnectionError("the response had started; no error response can follow")
        response = path_error_response(error, self._target_path)
        response.force_close()
        return response

    def data_received(self, data: bytes) -> None:
        if data:
            self._read_timer.note()
            request_line = _REQUEST_LINE.match(data)
            if request_line is not None:
                self._target_path = request_line.group(1).decode("ascii", errors="replace")
        super().data_received(data)

    def pause_reading(self) -> None:
        super().pause_reading()
        self._read_timer.waiting = False
        self._read_timer.stop()

    def resume_reading(self, resume_parser: bool = True) -> None:
        self._read_timer.waiting = True
        self._read_timer.note()  # before: resuming may parse buffered bytes and pause again
        super().resume_reading(resume_parser)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._read_timer.close()
        super().connection_lost(exc)

    async def finish_response(
        self, request: BaseRequest, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        result = await super().finish_response(request, resp, start_time)
        if self._body_stalled:
            self.force_close()  # after the answer is written: no lingering read of a body that stopped
        return result

    def _read_timed_out(self) -> None:
        request = self._current_request
        if request is None or request.content.is_eof():
            return  # no body is awaited; between requests the keep-alive timer bounds the wait
        self._body_stalled = True
        request.content.set_exception(
            RequestTimeout(
                f"The request body stopped arriving: nothing received for {self._read_timer.seconds:g}s "
                "(server.read_timeout). Send the whole body that Content-Length or chunked encoding announces."
            )
        )


class ProxyServer(web.Server):
    """aiohttp's low-level server, making ``ProxyRequestHandler`` connections."""

    def __call__(self) -> ProxyRequestHandler:
        return ProxyRequestHandler(self, loop=self._loop, **self._kwargs)


class ProxyAppRunner(web.AppRunner):
    """Runs a ctxproxy app on ``ProxyServer``, with ``[server] read_timeout`` and the options every
    way of starting ctxproxy shares: a client that disconnects cancels its handler (and with it
    the upstream call); no aiohttp access log (the request middleware logs each request);
    request bodies reach handlers as sent, still coded (``ctxproxy.server.body_coding`` decodes
    and checks them where a body is read)."""

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        read_timeout = app[CONFIG].current.settings.server.read_timeout
        kwargs.setdefault("handler_cancellation", True)
        kwargs.setdefault("auto_decompress", False)  # ctxproxy decodes request bodies itself (body_coding)
        kwargs.setdefault("access_log", None)
        super().__init__(app, keepalive_timeout=read_timeout, read_timeout=read_timeout, **kwargs)

    async def _make_server(self) -> web.Server:
        built = await super()._make_server()  # runs the app's startup; the options are in its kwargs
        return ProxyServer(
            built.request_handler,
            request_factory=built.request_factory,
            handler_cancellation=built.handler_cancellation,
            loop=built._loop,
            **built._kwargs,
        )

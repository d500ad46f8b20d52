"""Request context: request id, the per-request log line and metrics, CORS preflights
(``ctxproxy.server.cors``), and error rendering, in one middleware.

Handlers raise ``ProxyError``; this middleware renders it (a body that stopped arriving is
reported as such, whatever error the handler made of it). Anything else is a bug: the client
gets a generic 500 naming the request id, the log gets the traceback. Once a streaming response
has started, handlers deal with failures themselves; nothing here changes its status.

The ``request`` log line of a 4xx/5xx says why: ``error_code`` and a short ``cause`` (the
error's, never its message, which may quote the client; a relayed upstream error is
``upstream_status``). The same facts feed the app's metrics, recorded here once per request
with the request's stopwatch (``ctxproxy.stopwatch``).

A whole answer (a ``web.Response`` the handler did not send itself: a relayed JSON answer, an
error) is sent here, before that bookkeeping — the log line, the metrics and what the handler
left for after the answer (``AFTER_ANSWER``: the session's record) — instead of by aiohttp after
it, so the client does not wait for it, as a stream's client never did. The request is timed
up to the send, as before. The bookkeeping awaits nothing: a client that closes its connection
once it has its answer cancels the handler (``handler_cancellation``) at an await only, so it
cannot cut the bookkeeping short, and a cancellation while the answer is being written leaves
the answer's status in the log line, as when aiohttp wrote it after the line was logged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Callable

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from ctxproxy.errors import ProxyError, RequestTimeout
from ctxproxy.metrics import METRICS, route_label
from ctxproxy.server.cors import CORS_POLICY, mark_answer, preflight
from ctxproxy.server.render import http_error_code, http_exception_response, path_error_response
from ctxproxy.services import AFTER_ANSWER, ERROR_RESPONSE, LOG_FIELDS, REQUEST_ID, ErrorResponse, LogFields
from ctxproxy.stopwatch import Stopwatch, start_timing, stop_timing

log = structlog.get_logger("ctxproxy.request")
REQUEST_ID_HEADER = "X-Ctx-Request-Id"
_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
CLIENT_CLOSED = 499  # nginx's convention, for the log only


def _request_id(request: web.Request) -> str:
    given = request.headers.get("X-Request-Id")
    return given if given is not None and _CLIENT_REQUEST_ID.match(given) else uuid4_hex(os.urandom(16))


def uuid4_hex(random: bytes) -> str:
    """``uuid.uuid4().hex`` of these 16 random bytes — the version and variant bits set as
    ``uuid.UUID(bytes=..., version=4)`` sets them — without making the ``UUID``."""
    value = int.from_bytes(random, "big")
    value = (value & ~(0xC000 << 48) | 0x8000 << 48) & ~(0xF000 << 64) | 4 << 76
    return f"{value:032x}"


@web.middleware
async def request_context(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The request's context, its preflight (``ctxproxy.server.cors``) and its errors, in one
    layer: each layer of middleware is a coroutine and a call more for every request."""
    request_id = _request_id(request)
    request[REQUEST_ID] = request_id
    fields: LogFields = {}
    request[LOG_FIELDS] = fields
    after: list[Callable[[], None]] = []
    request[AFTER_ANSWER] = after
    status, own_error = 500, False
    # Bound for the request, then as before (``bound_contextvars``' effect, without its copy of the context).
    bound = structlog.contextvars.bind_contextvars(request_id=request_id)
    watch, token = start_timing()
    timed = True
    try:
        try:
            policy = request.app.get(CORS_POLICY) if request.method == "OPTIONS" else None
            answered = preflight(request, policy) if policy is not None else None
            response = answered if answered is not None else await handler(request)
        except asyncio.CancelledError:
            status = CLIENT_CLOSED
            raise
        except Exception as exc:
            response, own_error = _failed(request, exc, request_id), True
        status = response.status
        if type(response) is web.Response and not response.prepared:  # a whole answer: sent first
            timed = False
            stop_timing(watch, token)
            await _send(request, response)
        return response
    finally:
        if timed:
            stop_timing(watch, token)
        for later in after:
            later()
        after.clear()  # what it holds holds the request: no cycle left for the collector
        _done(request, status, fields, watch, own_error)
        structlog.contextvars.reset_contextvars(**bound)


async def _send(request: web.Request, response: web.Response) -> None:
    """Write ``response`` whole, as aiohttp writes what a handler returns; a client gone meanwhile
    ends its connection, as aiohttp ends it when that write fails."""
    try:
        await response.prepare(request)
        await response.write_eof()
    except ConnectionError:
        request.protocol.force_close()


def _done(request: web.Request, status: int, fields: LogFields, watch: Stopwatch, own_error: bool) -> None:
    """The request's log line and metrics."""
    status = fields.pop("status", status)
    if status >= 400 and "error_code" not in fields:
        _explain_relayed(fields, status)
    if watch.hooks:
        fields["hooks_ms"] = round(watch.hooks * 1000, 1)  # what plugins' hooks cost this request
    if log.is_enabled_for(logging.INFO):  # else its fields are not even gathered
        log.info(
            "request",
            method=request.method,
            path=request.path,
            status=status,
            latency_ms=round(watch.elapsed * 1000, 2),
            **fields,
        )
    structlog.contextvars.unbind_contextvars("tenant")
    metrics = request.app.get(METRICS)
    if metrics is not None:
        metrics.request_done(route_label(request), status, fields, watch, own_error=own_error)


def note_tenant(request: web.Request, tenant: str) -> None:
    """The request is the tenant's: its log line says so, and so does every line logged while it
    runs (compaction, summariser, tools), tasks it starts included."""
    request[LOG_FIELDS]["tenant"] = tenant
    structlog.contextvars.bind_contextvars(tenant=tenant)


def _failed(request: web.Request, exc: Exception, request_id: str) -> web.StreamResponse:
    """The answer to a request whose handler raised ``exc``: an error of ctxproxy's own,
    explained in the log fields. Called while ``exc`` is being handled (its traceback is logged)."""
    fields = request[LOG_FIELDS]
    if isinstance(exc, ProxyError):
        error = _body_stall(request) or exc
        fields.update(error_code=error.code, cause=error.cause)
        if error.param is not None:
            fields["error_param"] = error.param
        return _rendered(request, error)
    if isinstance(exc, web.HTTPException):
        fields.update(error_code=http_error_code(exc), cause=exc.reason)
        return http_exception_response(exc, request.path)
    log.exception("request.unhandled_error")
    fields.update(error_code="internal_error", cause=f"unhandled {type(exc).__name__}")
    internal = ProxyError(f"Internal proxy error (request id {request_id}).", code="internal_error")
    return _rendered(request, internal)


def _rendered(request: web.Request, error: ProxyError) -> web.Response:
    """``error`` in the shape of the protocol the request speaks: as its route said, else as its path says."""
    render: ErrorResponse | None = request.get(ERROR_RESPONSE)
    if render is None:
        request_id: str | None = request.get(REQUEST_ID)
        return path_error_response(error, request.raw_path, request_id)
    return render(error, request)


def _explain_relayed(fields: LogFields, status: int) -> None:
    """A 4xx/5xx ctxproxy did not make: the upstream's, relayed, or the client gone (499)."""
    if status == CLIENT_CLOSED:
        fields.update(error_code="client_closed", cause="the client disconnected before the answer ended")
    else:
        fields.update(error_code="upstream_status", cause=f"the upstream answered {status}, relayed")


def _body_stall(request: web.Request) -> RequestTimeout | None:
    """The client's body stopped arriving: whatever the handler made of that (a relayed upload
    fails upstream-side), the client is told the real cause."""
    failure = request.content.exception()
    return failure if isinstance(failure, RequestTimeout) else None


async def add_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: every response, streamed ones included, names its request, and
    then carries its CORS headers (``ctxproxy.server.cors.mark_answer``), which expose that name."""
    request_id = request.get(REQUEST_ID)
    if request_id is not None:
        response.headers.setdefault(REQUEST_ID_HEADER, request_id)
    policy = request.app.get(CORS_POLICY)
    if policy is not None:
        mark_answer(request, response, policy)

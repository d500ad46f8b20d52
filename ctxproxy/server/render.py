"""The one place errors become HTTP responses, each in the shape of the protocol the request
speaks: as its route says (``error_renderer``, set as the request's ``ERROR_RESPONSE``), else as
its path says (``path_error_response``, also for an answer made before any route runs):
Anthropic's on ``/v1/messages`` and below, Google's on Gemini's paths, OpenAI's everywhere else."""

from __future__ import annotations

import re

from aiohttp import web

from ctxproxy.errors import ProxyError, error_body
from ctxproxy.services import REQUEST_ID, ErrorResponse
from ctxproxy.wire.keys import GEMINI, OPENAI, ErrorJson, is_gemini_path, relayed_protocol

_API_PREFIX = re.compile(r"^(?:/t/[^/]+)?/v1(?=/)")  # the routes' own part: a tenant, then /v1

_HTTP_TYPES = {401: "authentication_error", 403: "permission_error", 404: "invalid_request_error"}


def path_error_json(path: str) -> ErrorJson:
    """The error shape of the protocol whose path ``path`` is (as the client sent it)."""
    if is_gemini_path(path):
        return GEMINI.error_json
    prefix = _API_PREFIX.match(path)
    return (relayed_protocol(path[prefix.end() :]) if prefix else OPENAI).error_json


def path_error_response(error: ProxyError, path: str, request_id: str | None = None) -> web.Response:
    """``error`` in the shape of the protocol whose path ``path`` is."""
    body = path_error_json(path)(error, request_id=request_id)
    return _closing(web.Response(body=body, status=error.status, content_type="application/json"), error)


def error_renderer(error_json: ErrorJson) -> ErrorResponse:
    """An ``ERROR_RESPONSE`` that writes the error with ``error_json``, naming the request's id."""

    def render(error: ProxyError, request: web.Request) -> web.Response:
        body = error_json(error, request_id=request.get(REQUEST_ID))
        return _closing(web.Response(body=body, status=error.status, content_type="application/json"), error)

    return render


def _closing(response: web.Response, error: ProxyError) -> web.Response:
    if error.closes_connection:
        response.force_close()
    return response


def http_error_code(exc: web.HTTPException) -> str | None:
    """The ``code`` of aiohttp's own error as ctxproxy renders it."""
    if exc.status == 404:
        return "not_found"
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return "method_not_allowed"
    return None


def http_exception_response(exc: web.HTTPException, path: str) -> web.Response:
    """aiohttp's own 404 / 405 / 413 …, rendered like every other error."""
    code = http_error_code(exc)
    if exc.status == 404:
        message = f"Unknown path {path}; ctxproxy serves /v1/... and /t/{{tenant}}/v1/..."
    elif isinstance(exc, web.HTTPMethodNotAllowed):
        message = f"{exc.method} is not allowed on {path}; use {', '.join(sorted(exc.allowed_methods))}."
    else:
        message = exc.reason or "Request failed."
    kind = _HTTP_TYPES.get(exc.status, "invalid_request_error" if exc.status < 500 else "server_error")
    response = web.json_response(error_body(message, kind, None, code), status=exc.status)
    if exc.status == 405 and "Allow" in exc.headers:
        response.headers["Allow"] = exc.headers["Allow"]
    return response

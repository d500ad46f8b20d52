"""The one place errors become HTTP responses: OpenAI-shaped by default (``error_response``), in
another protocol's shape on its paths (``error_renderer``, set as the request's ``ERROR_RESPONSE``)."""

from __future__ import annotations

from aiohttp import web

from ctxproxy.errors import ProxyError, error_body
from ctxproxy.services import REQUEST_ID, ErrorResponse
from ctxproxy.wire.keys import ErrorJson

_HTTP_TYPES = {401: "authentication_error", 403: "permission_error", 404: "invalid_request_error"}


def error_response(error: ProxyError) -> web.Response:
    return _closing(web.json_response(error.body(), status=error.status), error)


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

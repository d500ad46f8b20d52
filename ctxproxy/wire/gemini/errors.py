"""A ctxproxy error as Google's APIs frame errors (``google.rpc.Status`` over HTTP)::

    {"error": {"code": 400, "message": "...", "status": "INVALID_ARGUMENT"}}

A JSON answer carries it with the HTTP status ``code``; once a stream has started it is one
event, ``data: {"error": {...}}``. ``status`` is the canonical code Google pairs with the HTTP
status (https://ai.google.dev/gemini-api/docs/troubleshooting, ``google.rpc.Code``): 400
``INVALID_ARGUMENT``, 401 ``UNAUTHENTICATED``, 403 ``PERMISSION_DENIED``, 404 ``NOT_FOUND``, 408
and 504 ``DEADLINE_EXCEEDED``, 409 ``ABORTED``, 429 ``RESOURCE_EXHAUSTED``, 499 ``CANCELLED``, 501
``UNIMPLEMENTED``, 502 and 503 ``UNAVAILABLE``, 500 ``INTERNAL``; any other 4xx
``FAILED_PRECONDITION``, any other 5xx ``INTERNAL``. ctxproxy's own ``code`` word has no place in
it; the message says what happened.
"""

from __future__ import annotations

from typing import Any

import orjson

from ctxproxy.errors import ProxyError

__all__ = ["STATUSES", "error_body", "error_event", "error_json", "rpc_status"]

STATUSES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def rpc_status(http_status: int) -> str:
    """The canonical status word Google's errors pair with ``http_status``."""
    known = STATUSES.get(http_status)
    if known is not None:
        return known
    return "FAILED_PRECONDITION" if 400 <= http_status < 500 else "INTERNAL"


def error_body(error: ProxyError) -> dict[str, Any]:
    return {"error": {"code": error.status, "message": error.message, "status": rpc_status(error.status)}}


def error_json(error: ProxyError, *, request_id: str | None = None) -> bytes:
    """The JSON answer's body (its HTTP status is ``error.status``); Google's errors name no request id."""
    return orjson.dumps(error_body(error))


def error_event(error: ProxyError) -> bytes:
    """The error as one event of a stream that has started."""
    return b"data: " + error_json(error) + b"\r\n\r\n"

"""The one error hierarchy of ctxproxy.

Every error a client can see is a ``ProxyError``; its class fixes the HTTP status and the
OpenAI ``type`` / ``code`` fields, so no handler chooses a status by reading exception text::

    ProxyError (500 server_error)
    ├── BadRequest (400 invalid_request_error)
    │   ├── BodyTooLarge (413 request_too_large)
    │   ├── RequestTimeout (408 request_timeout; closes the connection)
    │   ├── UnsupportedEncoding (415 unsupported_content_encoding)
    │   ├── Uncompactable (400: what ctxproxy cannot compact safely; the pipeline forwards it as sent)
    │   └── ContextLengthExceeded (400 context_length_exceeded)
    ├── Unauthorized (401 invalid_proxy_key)
    ├── Forbidden (403 forbidden)
    ├── NotFound (404 not_found)
    │   └── TenantNotFound (404 tenant_not_found)
    └── UpstreamError (502 upstream_error)
        ├── UpstreamUnavailable (502 upstream_connection_error)
        └── UpstreamTimeout (504 upstream_timeout)

``render`` turns any of them into the OpenAI error body
``{"error": {"message", "type", "param", "code"}}``. ``cause`` is what the log says of it: a
short phrase of ctxproxy's own, never the message (which may quote what the client sent).
"""

from __future__ import annotations

from typing import Any, ClassVar


class ProxyError(Exception):
    status: ClassVar[int] = 500
    type: ClassVar[str] = "server_error"
    code: ClassVar[str | None] = None
    closes_connection: ClassVar[bool] = False
    default_cause: ClassVar[str] = "internal error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None, cause: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        self.cause = cause or self.default_cause
        if code is not None:
            self.code = code  # type: ignore[misc]

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)


class BadRequest(ProxyError):
    status = 400
    type = "invalid_request_error"
    code = "invalid_request"
    default_cause = "invalid request"


class BodyTooLarge(BadRequest):
    status = 413
    code = "request_too_large"
    default_cause = "body over server.max_body_bytes"


class RequestTimeout(BadRequest):
    """The client stopped sending its request; the rest of it will not be read."""

    status = 408
    code = "request_timeout"
    closes_connection = True
    default_cause = "the client stopped sending its body"


class UnsupportedEncoding(BadRequest):
    status = 415
    code = "unsupported_content_encoding"
    default_cause = "unsupported Content-Encoding"


class Uncompactable(BadRequest):
    """Something in a request ctxproxy cannot compact safely (a role, a block or a field's form it
    does not model). The pipeline never refuses such a request: it forwards it as the client sent
    it and says so (``X-Ctx-Forwarded-As-Sent``); only where nothing can forward it is it a 400."""

    default_cause = "not compactable"


class ContextLengthExceeded(BadRequest):
    code = "context_length_exceeded"
    default_cause = "the conversation does not fit the model's window"


class Unauthorized(ProxyError):
    status = 401
    type = "authentication_error"
    code = "invalid_proxy_key"
    default_cause = "missing or wrong key"


class Forbidden(ProxyError):
    status = 403
    type = "permission_error"
    code = "forbidden"
    default_cause = "forbidden"


class NotFound(ProxyError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"
    default_cause = "not found"


class TenantNotFound(NotFound):
    code = "tenant_not_found"
    default_cause = "unknown tenant"


class UpstreamError(ProxyError):
    status = 502
    type = "upstream_error"
    code = "upstream_error"
    default_cause = "the upstream failed"


class UpstreamUnavailable(UpstreamError):
    code = "upstream_connection_error"
    default_cause = "could not reach the upstream"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"
    default_cause = "the upstream did not answer in time"


def error_body(message: str, type_: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}

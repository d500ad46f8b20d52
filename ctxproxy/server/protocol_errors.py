"""What the client is told when aiohttp's HTTP parser refuses a request (pure).

The parser's exceptions quote the offending bytes in their message: a header line holding an
``Authorization`` key, a piece of the body. None of that text is used, neither in the answer nor
in the log: both come from the exception's class alone.
"""

from __future__ import annotations

from aiohttp import http_exceptions as hx

from ctxproxy.errors import BadRequest, ProxyError

_PLAIN_HTTP = "This port speaks plain HTTP/1.1"

# Most specific first: the first class the exception is an instance of decides.
_BY_CLASS: tuple[tuple[type[Exception], str, str], ...] = (
    (
        hx.BadHttpMethod,
        "invalid_method",
        f"The request line has no valid HTTP method. {_PLAIN_HTTP}; a TLS (https://) client sent here looks like this.",
    ),
    (hx.LineTooLong, "line_too_long", "The request line or a header is longer than {limit} bytes."),
    (hx.InvalidURLError, "invalid_url", "The request target (URL) is malformed."),
    (hx.BadStatusLine, "invalid_request_line", "The request line is malformed; expected `METHOD /path HTTP/1.1`."),
    (hx.InvalidHeader, "invalid_header", "A header name or value is malformed."),
    (
        hx.PayloadEncodingError,
        "invalid_framing",
        "The body does not match its framing (Content-Length or chunked Transfer-Encoding).",
    ),
)
_MALFORMED = (
    "invalid_http",
    f"The request is not valid HTTP/1.1: check header names and values, Content-Length and Transfer-Encoding. "
    f"{_PLAIN_HTTP}.",
)


def protocol_error(status: int, exc: BaseException | None, line_limit: int) -> ProxyError:
    """The error to answer with when aiohttp's protocol layer fails a request with ``status``."""
    if status >= 500 or not isinstance(exc, hx.HttpProcessingError):
        return ProxyError("Internal proxy error while handling the request.", code="internal_error")
    code, message = next(((code, text) for cls, code, text in _BY_CLASS if isinstance(exc, cls)), _MALFORMED)
    return BadRequest(message.format(limit=line_limit), code=code)

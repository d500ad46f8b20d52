"""The head of a request to an upstream, as bytes, refused when a header could split it.

The client's headers are hostile: a name that is not a token, or a value or target holding a
CR, LF or NUL, would let a client write headers (or a second request) of its own. Such a head is
refused (``BadRequest``) before anything is sent. Text is encoded as UTF-8 with the bytes a
client sent that are not UTF-8 given back as they came (aiohttp's server decoded them with
``surrogateescape``), as aiohttp's client wrote them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from multidict import CIMultiDict

from ctxproxy.errors import BadRequest

__all__ = ["request_head"]

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def request_head(target: str, host: str, headers: CIMultiDict[str], length: int) -> bytes:
    """``POST target HTTP/1.1`` with ``Host``, ``headers`` and ``Content-Length: length``."""
    lines = [f"POST {target} HTTP/1.1\r\nHost: {host}\r\n"]
    for name, value in headers.items():
        if not _is_token(name):
            raise _refused("a header name that is not a token")
        lines.append(f"{name}: {value}\r\n")
    lines.append(f"Content-Length: {length}\r\n\r\n")
    text = "".join(lines)
    breaks = len(lines) + 2  # two in the first and last pieces, one in each header's
    if text.count("\n") != breaks or text.count("\r") != breaks or "\0" in text or " " in target:
        raise _refused("a line break, NUL or space where none may be")
    return text.encode("utf-8", "surrogateescape")


@lru_cache(maxsize=1024)
def _is_token(name: str) -> bool:
    return _TOKEN.fullmatch(name) is not None


def _refused(what: str) -> BadRequest:
    return BadRequest(
        f"The request's headers or path hold {what}; ctxproxy does not forward them: send plain header "
        "names and values.",
        code="invalid_header",
    )

"""Content-coded request bodies (``Content-Encoding``): which are accepted, how they are decoded,
and their failures.

ctxproxy decodes request bodies itself (its server runs with aiohttp's ``auto_decompress`` off:
aiohttp accepts a gzip stream that stops short, without its CRC and length trailer, and refuses
a cut deflate stream in its parser, before any route knows the request's protocol). So:

- ``request_coding`` refuses (415) a coding other than ``DECODED``, and more than one coding;
  ``identity`` is no coding at all;
- ``BodyDecoder`` decodes in bounded steps (``STEP`` bytes of output at a time), so a reader that
  stops at ``server.max_body_bytes`` never holds much more than that however well the body was
  compressed, and refuses (400 ``invalid_content_encoding``) a body that is not the coding it
  claims, that stops before its stream ends (a cut body, a gzip member without its trailer), or
  that goes on after it (bytes after a deflate stream; after a gzip member, only more members);
- ``Content-Encoding`` is never forwarded upstream (``ctxproxy.upstream.headers``), and a forwarded
  decoded body carries its decoded length.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from multidict import CIMultiDictProxy

from ctxproxy.errors import BadRequest, UnsupportedEncoding

HEADER = "Content-Encoding"
DECODED = ("gzip", "deflate")
IDENTITY = "identity"
STEP = 64 * 1024  # decoded bytes produced at a time
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS  # "deflate" as RFC 9110 says: zlib's header and checksum around the stream
_RAW_WBITS = -zlib.MAX_WBITS  # "deflate" as some clients send it: the bare stream


def request_coding(headers: CIMultiDictProxy[str]) -> str | None:
    """The coding the body is in (``"gzip"`` …), or None for an uncoded body."""
    given = headers.getall(HEADER, [])
    if not given:
        return None
    coding = given[0].lower()
    if len(given) == 1 and coding in DECODED:
        return coding
    if len(given) == 1 and coding == IDENTITY:
        return None
    shown = ", ".join(given)
    raise UnsupportedEncoding(
        f"{HEADER} {shown[:60]!r} is not supported: send the body uncoded, or coded once with {' or '.join(DECODED)}.",
        param=HEADER,
    )


class BodyDecoder:
    """One body in ``coding`` (one of ``DECODED``), fed as it arrives; ``finish`` when it has all come."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self._head = b""  # deflate: the first bytes, until they tell a zlib header from a bare stream
        self._stream: zlib._Decompress | None = zlib.decompressobj(_GZIP_WBITS) if coding == "gzip" else None
        self._fed = False

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        """The decoded bytes of ``chunk``, at most ``STEP`` at a time."""
        if not chunk:
            return
        self._fed = True
        if self._stream is None:
            self._head += chunk
            if len(self._head) < 2:
                return
            self._stream = zlib.decompressobj(_ZLIB_WBITS if _zlib_header(self._head) else _RAW_WBITS)
            chunk, self._head = self._head, b""
        yield from self._decode(self._stream, chunk)

    def finish(self) -> None:
        """The body has ended: it must have ended where its stream does."""
        if not self._fed:
            return  # no bytes at all: an empty body, as sent
        if self._stream is None or not self._stream.eof:
            raise self._invalid("it ends before its compressed stream does (cut short?)")

    def _decode(self, stream: zlib._Decompress, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = stream.decompress(data, STEP)
            except zlib.error:
                raise self._invalid("it is not valid compressed data") from None
            if out:
                yield out
            data = stream.unconsumed_tail
            if stream.eof and stream.unused_data:
                if self.coding != "gzip":
                    raise self._invalid("bytes follow the end of its compressed stream")
                data, stream = stream.unused_data, zlib.decompressobj(_GZIP_WBITS)  # the next gzip member
                self._stream = stream
            elif not data and len(out) < STEP:
                return

    def _invalid(self, why: str) -> BadRequest:
        return BadRequest(
            f"The request body does not decode as {HEADER} {self.coding!r}: {why}. Send it coded as its header "
            "says, or uncoded without the header.",
            param=HEADER,
            code="invalid_content_encoding",
            cause="body does not decode",
        )


def _zlib_header(head: bytes) -> bool:
    """Whether a deflate body starts with a zlib header (RFC 1950: method 8, check bits)."""
    return head[0] & 0x0F == 8 and ((head[0] << 8) | head[1]) % 31 == 0

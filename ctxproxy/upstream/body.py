"""A request body on its way upstream that is the client's bytes with something spliced in.

A chat stream asks for its usage by an option inserted after the body's opening brace
(``usage.ask_for_usage``): that body was the client's bytes joined around the option, a copy,
and aiohttp then joined it to the request's headers for one write to the socket, a second copy
on Python before 3.12.9 (``aiohttp.http_writer.SKIP_WRITELINES``) — each ~10–40 µs for a 490 KB
history. ``Spliced`` keeps such a body as its pieces: a small ``head`` (what precedes the
client's bytes) and the ``tail``, a view of the client's bytes. ``payload`` hands aiohttp a
spliced body of at least :data:`UNJOINED_FROM` bytes as ``SplicedPayload``, which writes the
head with the headers (a small join), then the tail as it is: the bytes sent are the same, one
more ``send`` instead of two copies. A shorter one is joined (copying less costs less than a
second ``send``); a plain body (``bytes``: the client's own, or one ctxproxy made) goes as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp.abc import AbstractStreamWriter
from aiohttp.payload import Payload

__all__ = ["UNJOINED_FROM", "Outgoing", "Spliced", "SplicedPayload", "payload"]

UNJOINED_FROM = 64 * 1024  # bytes: a spliced body this long is written without being joined


@dataclass(frozen=True, slots=True)
class Spliced:
    """A body that is ``head`` followed by ``tail``, never joined into one object here."""

    head: bytes
    tail: memoryview

    def __len__(self) -> int:
        return len(self.head) + self.tail.nbytes

    def __bytes__(self) -> bytes:
        return b"".join((self.head, self.tail))


Outgoing = bytes | Spliced  # what ``UpstreamPort.post`` sends


class SplicedPayload(Payload):
    """aiohttp's payload for a ``Spliced`` body: the head goes with the headers, the tail on its own."""

    _value: Spliced
    _autoclose = True  # bytes in memory: nothing to close

    def __init__(self, body: Spliced, content_type: str) -> None:
        super().__init__(body, content_type=content_type)
        self._size = len(body)

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return bytes(self._value).decode(encoding, errors)

    async def write(self, writer: AbstractStreamWriter) -> None:
        await writer.write(self._value.head)  # the headers are still held: joined to them (small)
        await writer.write(self._value.tail)  # written as it is

    async def write_with_length(self, writer: AbstractStreamWriter, content_length: int | None) -> None:
        if content_length is None or content_length >= len(self._value):
            await self.write(writer)
        else:  # only for a Content-Length shorter than the body, which ctxproxy never sets
            await writer.write(bytes(self._value)[:content_length])


def payload(body: Outgoing, content_type: str) -> bytes | SplicedPayload:
    """What aiohttp is given to send ``body`` (module docstring)."""
    if isinstance(body, bytes):
        return body
    if len(body) < UNJOINED_FROM:
        return bytes(body)
    return SplicedPayload(body, content_type)

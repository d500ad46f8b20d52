"""A request body on its way upstream that is the client's bytes with something spliced in.

A chat stream asks for its usage by an option inserted after the body's opening brace
(``usage.ask_for_usage``): that body was the client's bytes joined around the option, a copy of a
history that may be 490 KB. ``Spliced`` keeps such a body as its pieces: a small ``head`` (what
precedes the client's bytes) and the ``tail``, a view of the client's bytes.

``buffers`` gives what the connection writes, one ``write`` each (Python 3.11's
``transport.writelines`` joins its pieces, so the pieces are written one by one): a body shorter
than :data:`UNJOINED_FROM` goes joined to the request's head, one ``send`` (copying it costs
less than a second ``send``); a longer one after the head, a spliced one's small head joined to
the request's head and its tail as it is: the bytes sent are the same, never joined.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["UNJOINED_FROM", "Outgoing", "Spliced", "buffers"]

UNJOINED_FROM = 64 * 1024  # bytes: a body this long is not joined to the request's head


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


def buffers(head: bytes, body: Outgoing) -> tuple[bytes | memoryview, ...]:
    """The request ``head`` and ``body`` as the connection writes them (module docstring)."""
    if isinstance(body, bytes):
        return (head + body,) if len(body) < UNJOINED_FROM else (head, body)
    if len(body) < UNJOINED_FROM:
        return (b"".join((head, body.head, body.tail)),)
    return (head + body.head, body.tail)

"""The tenant's ``read_timeout`` on a relayed stream, kept by one timer per stream.

aiohttp's ``sock_read`` restarts a timer at every packet received (a ``call_later`` and a
``cancel``, about 2 µs); a streamed answer arrives a token or so a packet, hundreds of them. Once
the answer's headers are in (aiohttp's timer bounds the wait for them), ``StreamRead`` turns
aiohttp's timer off for that response and keeps the bound itself: each read notes when its wait
for bytes begins (two stores, no timer touched), and one timer (``ctxproxy.deadline``), on from
the first read to ``close()``, fails a wait that lasted ``read_timeout`` with aiohttp's own error
(``SocketTimeoutError``), so the failure is what it was (``upstream_timeout``). Only time spent
waiting for the upstream counts: unlike aiohttp's timer, which counted a silence of the upstream
while the relay wrote to a slow client (unless its read buffer was full), time the relay spends
not waiting is not counted. The connection's own timer is set again for its next request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Protocol

import aiohttp

from ctxproxy.deadline import Deadline
from ctxproxy.upstream.http1 import AnyResponse

__all__ = ["Reads", "StreamRead"]


class Reads(Protocol):
    """What reads a stream's body: ``aiohttp.StreamReader`` or a ``StreamRead``."""

    async def readany(self) -> bytes: ...

    def at_eof(self) -> bool: ...  # the body is over and every byte of it was read

    def exception(self) -> BaseException | None: ...  # what the next read raises


class StreamRead:
    """``up``'s body, read with ``seconds`` as the longest wait for bytes (module docstring)."""

    __slots__ = ("_content", "_loop", "_timer", "at_eof")

    def __init__(self, up: AnyResponse, seconds: float) -> None:
        content = self._content = up.content
        self.at_eof: Callable[[], bool] = content.at_eof  # Reads.at_eof, asked every read: the body's own
        self._loop = loop = asyncio.get_running_loop()
        self._timer = Deadline(loop, seconds, partial(_time_out, content))  # waiting only inside readany
        self._timer.note()  # armed until close(): a read only notes when it began
        connection = up.connection
        if connection is not None and connection.protocol is not None:
            connection.protocol.read_timeout = None
            connection.protocol.start_timeout()  # with no timeout: cancels the one pending

    async def readany(self) -> bytes:
        timer = self._timer
        timer.waiting = True
        timer.since = self._loop.time()
        try:
            return await self._content.readany()
        finally:
            timer.waiting = False

    def exception(self) -> BaseException | None:
        return self._content.exception()

    def close(self) -> None:
        self._timer.stop()


def _time_out(content: aiohttp.StreamReader) -> None:
    """A wait lasted ``read_timeout``: the body fails as aiohttp's timer failed it."""
    content.set_exception(aiohttp.SocketTimeoutError("Timeout on reading data from socket"))

"""The tenant's ``read_timeout`` on a relayed stream, kept by one timer per stream.

aiohttp's ``sock_read`` restarts a timer at every packet received (a ``call_later`` and a
``cancel``, about 2 µs); a streamed answer arrives a token or so a packet, hundreds of them. Once
the answer's headers are in (aiohttp's timer bounds the wait for them), ``StreamRead`` turns
aiohttp's timer off for that response and keeps the bound itself: it notes when each wait for
bytes begins, and one timer (``ctxproxy.deadline``) — re-armed only when it fires during a wait
that began later — fails a wait that lasted ``read_timeout`` with aiohttp's own error (``SocketTimeoutError``), so the
failure is what it was (``upstream_timeout``). Only time spent waiting for the upstream counts:
unlike aiohttp's timer, which counted a silence of the upstream while the relay wrote to a slow
client (unless its read buffer was full), time the relay spends not waiting is not counted. The
connection's own timer is set again by aiohttp for its next request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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

    __slots__ = ("_content", "_timer", "at_eof")

    def __init__(self, up: AnyResponse, seconds: float) -> None:
        content = self._content = up.content
        self.at_eof: Callable[[], bool] = content.at_eof  # Reads.at_eof, asked every read: the body's own
        # Waiting only inside readany; the failure is the body's (no reference back to self).
        self._timer = Deadline(
            asyncio.get_running_loop(),
            seconds,
            lambda: content.set_exception(aiohttp.SocketTimeoutError("Timeout on reading data from socket")),
        )
        connection = up.connection
        if connection is not None and connection.protocol is not None:
            connection.protocol.read_timeout = None
            connection.protocol.start_timeout()  # with no timeout: cancels the one pending

    async def readany(self) -> bytes:
        timer = self._timer
        timer.start()
        try:
            return await self._content.readany()
        finally:
            timer.waiting = False

    def exception(self) -> BaseException | None:
        return self._content.exception()

    def close(self) -> None:
        self._timer.stop()

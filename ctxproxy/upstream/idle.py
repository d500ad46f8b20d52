"""The tenant's ``read_timeout`` on a relayed stream, kept by one timer per stream.

aiohttp's ``sock_read`` restarts a timer at every packet received (a ``call_later`` and a
``cancel``, about 2 µs); a streamed answer arrives a token or so a packet, hundreds of them. Once
the answer's headers are in (aiohttp's timer bounds the wait for them), ``StreamRead`` turns
aiohttp's timer off for that response and keeps the bound itself: it notes when each wait for
bytes begins, and one timer — re-armed only when it fires during a wait that began later — fails
a wait that lasted ``read_timeout`` with aiohttp's own error (``SocketTimeoutError``), so the
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

from ctxproxy.upstream.http1 import AnyResponse

__all__ = ["Reads", "StreamRead"]

_EARLY = 0.001  # seconds: a timer may fire this much before its time and still count


class Reads(Protocol):
    """What reads a stream's body: ``aiohttp.StreamReader`` or a ``StreamRead``."""

    async def readany(self) -> bytes: ...

    def at_eof(self) -> bool: ...  # the body is over and every byte of it was read

    def exception(self) -> BaseException | None: ...  # what the next read raises


class StreamRead:
    """``up``'s body, read with ``seconds`` as the longest wait for bytes (module docstring)."""

    __slots__ = ("_content", "_loop", "_seconds", "_since", "_timer", "at_eof")

    def __init__(self, up: AnyResponse, seconds: float) -> None:
        self._content = up.content
        self.at_eof: Callable[[], bool] = up.content.at_eof  # Reads.at_eof, asked every read: the body's own
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._since: float | None = None  # when the current wait for bytes began; None: not waiting
        self._timer: asyncio.TimerHandle | None = None
        connection = up.connection
        if connection is not None and connection.protocol is not None:
            connection.protocol.read_timeout = None
            connection.protocol.start_timeout()  # with no timeout: cancels the one pending

    async def readany(self) -> bytes:
        self._since = since = self._loop.time()
        if self._timer is None:
            self._timer = self._loop.call_at(since + self._seconds, self._fire)
        try:
            return await self._content.readany()
        finally:
            self._since = None

    def exception(self) -> BaseException | None:
        return self._content.exception()

    def _fire(self) -> None:
        self._timer = None
        if self._since is None:
            return  # not waiting: the next wait arms it again
        due = self._since + self._seconds
        if self._loop.time() + _EARLY >= due:
            self._content.set_exception(aiohttp.SocketTimeoutError("Timeout on reading data from socket"))
        else:
            self._timer = self._loop.call_at(due, self._fire)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

"""A bound on a wait for a peer's bytes, kept by one loop timer.

A timer restarted at every packet costs a ``call_at`` and a ``cancel`` each (about 2 µs); a
stream brings hundreds of packets. A ``Deadline`` instead notes when the peer was last heard from
(``since``: one float stored, or ``note()`` when the timer may need arming), and its one timer,
when it fires, is re-armed for ``seconds`` after the newest activity unless that time has come;
then it calls ``expire``. Time the peer is not to blame for is not counted: while ``waiting`` is
False (nobody waits on the peer: a relay between two reads, reading paused by flow control) or
``held()`` says so (asked at each fire, for an owner that cannot tell when a pause ends: the
reader is full), a fire restarts the count from then and the timer stays on.

Its callbacks usually hold their owner, which holds the deadline: ``close()`` lets go of them when
the owner is done (a closed connection), so the owner is freed without the cycle collector, as it
was with a bare timer handle.

The client's request body (``ctxproxy.server.protocol``), an upstream connection's answer
(``ctxproxy.upstream.http1``) and a relayed stream (``ctxproxy.upstream.idle``) are each bounded
by one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["Deadline"]

EARLY = 0.001  # seconds: a timer may fire this much before its time and still count


class Deadline:
    """``expire()`` is called once a wait has lasted ``seconds`` (module docstring)."""

    __slots__ = ("seconds", "since", "waiting", "_loop", "_expire", "_held", "_handle")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        seconds: float,
        expire: Callable[[], object],
        held: Callable[[], bool] | None = None,
    ) -> None:
        self.seconds = seconds
        self.since = 0.0  # when the peer was last heard from, or the wait began
        self.waiting = True
        self._loop = loop
        self._expire = expire
        self._held = held
        self._handle: asyncio.TimerHandle | None = None

    def note(self) -> None:
        """The peer's bytes came now (or a wait began); the timer is armed if it is not."""
        self.since = now = self._loop.time()
        if self._handle is None:
            self._handle = self._loop.call_at(now + self.seconds, self._fire)

    def stop(self) -> None:
        """The timer off (``note()`` arms it again)."""
        handle = self._handle
        if handle is not None:
            handle.cancel()
            self._handle = None

    def close(self) -> None:
        """Stopped for good: the callbacks are let go (module docstring)."""
        self.stop()
        self._expire = _nothing
        self._held = None

    def _fire(self) -> None:
        self._handle = None
        now = self._loop.time()
        if not self.waiting or (self._held is not None and self._held()):
            self.since = now  # the silence is ours, not the peer's
        due = self.since + self.seconds
        if now + EARLY < due:  # not yet: wait for the rest
            self._handle = self._loop.call_at(due, self._fire)
        else:
            self._expire()


def _nothing() -> None:
    """A closed deadline's expiry."""

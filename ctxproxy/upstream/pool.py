"""Keep-alive connections to upstreams, per origin, at most ``limit`` open at once.

A connection is handed out again only when its last answer was read to its end and it is still
open and idle less than :data:`KEEPALIVE` (as aiohttp's client: an upstream's keep-alive timeout
is often longer, and one that closes a connection just as a request is written on it fails that
request): one the upstream closed while it was idle, or idle longer, is dropped when met, one
whose answer was left unread (the client went away, an error, a retry) is closed on release. The
most recently used idle connection is taken first (the one least likely to have been closed by
the upstream's keep-alive timeout). When ``limit`` connections are open, an idle one to another
origin is closed to make room, or the call waits for one to be released; ``connect_timeout``
bounds that wait and the connection's setup together, as aiohttp's ``connect`` did.

An idle connection is not left open until the upstream closes it: one timer per pool, armed when
a connection goes idle and none is armed, closes those idle ``keepalive`` or longer (and those
the upstream closed) and is armed again for the oldest left; with no idle connection, none is
armed. ``close`` closes the idle ones at once. A new connection is made by
``ctxproxy.upstream.dial``: the host's addresses from the pool's ``Resolver`` (looked up once for
``[server] upstream_dns_ttl``), the first that answers.

TLS (an ``https`` base URL) is verified against the system's certificates
(``ssl.create_default_context()``, made once, when first needed), with the base URL's host as the
name to verify. No proxy is taken from the environment and no cookie is kept.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque

import aiohttp

from ctxproxy.upstream.dial import dial
from ctxproxy.upstream.headers import Origin
from ctxproxy.upstream.http1 import Http1Connection
from ctxproxy.upstream.resolver import Resolver

__all__ = ["POOL_LIMIT", "Pool"]

POOL_LIMIT = 1000  # connections open at once, to every upstream together
KEEPALIVE = 15.0  # seconds an idle connection is kept (aiohttp's client's keepalive_timeout)


class Pool:
    __slots__ = ("_limit", "_keepalive", "_idle", "_open", "_waiters", "_tls", "_closed", "_resolver", "_sweep")

    def __init__(
        self,
        limit: int = POOL_LIMIT,
        tls: ssl.SSLContext | None = None,
        keepalive: float = KEEPALIVE,
        resolver: Resolver | None = None,
    ) -> None:
        self._limit = limit
        self._keepalive = keepalive
        self._idle: dict[tuple[str, str, int], list[Http1Connection]] = {}
        self._open = 0  # connections open or being opened, idle ones included
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._tls = tls
        self._closed = False
        self._resolver = resolver if resolver is not None else Resolver()
        self._sweep: asyncio.TimerHandle | None = None  # armed while connections are idle

    @property
    def open(self) -> int:
        return self._open

    def take(self, origin: Origin) -> Http1Connection | None:
        """An idle connection to ``origin``, if one is open (no coroutine: the common case)."""
        return self._idle_one(origin[:3])

    async def acquire(self, origin: Origin, connect_timeout: float) -> Http1Connection:
        """A connection to ``origin``: an idle one, else a new one (module docstring)."""
        connection = self._idle_one(origin[:3])
        if connection is not None:
            return connection
        try:
            async with asyncio.timeout(connect_timeout):
                return await self._acquire_new(origin)
        except TimeoutError as exc:
            raise aiohttp.ConnectionTimeoutError(f"Connection timeout to {origin.scheme} upstream") from exc

    def release(self, connection: Http1Connection) -> None:
        """Back to the pool when reusable, otherwise closed."""
        if not self._closed and connection.is_reusable():
            connection.rest()
            self._idle.setdefault(connection.origin, []).append(connection)
            if self._sweep is None:
                self._arm(self._keepalive)
        else:
            self._drop(connection)
        self._wake()

    def close(self) -> None:
        """Close the idle connections; those in use are closed when released."""
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        self._resolver.close()
        for idle in self._idle.values():
            for connection in idle:
                self._drop(connection)
        self._idle.clear()

    def _idle_one(self, key: tuple[str, str, int]) -> Http1Connection | None:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if connection.is_reusable() and connection.idle_for() < self._keepalive:
                return connection
            self._drop(connection)
        return None

    def _arm(self, delay: float) -> None:
        self._sweep = asyncio.get_running_loop().call_later(delay, self._swept)

    def _swept(self) -> None:
        """Close the connections idle ``keepalive`` or longer, or closed by the upstream, and arm
        the timer again for when the oldest one left is due (none left: not armed)."""
        self._sweep = None
        oldest = 0.0
        dropped = False
        for key, idle in list(self._idle.items()):
            kept = []
            for connection in idle:
                idle_for = connection.idle_for()
                if idle_for < self._keepalive and connection.is_reusable():
                    kept.append(connection)
                    oldest = max(oldest, idle_for)
                else:
                    self._drop(connection)
                    dropped = True
            if kept:
                self._idle[key] = kept
            else:
                del self._idle[key]
        if self._idle:
            self._arm(self._keepalive - oldest)
        if dropped:
            self._wake()

    async def _acquire_new(self, origin: Origin) -> Http1Connection:
        key = origin[:3]
        while True:
            connection = self._idle_one(key)
            if connection is not None:
                return connection
            if self._open < self._limit or self._evict_one():
                return await self._connect(origin)
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # it was woken: pass the turn on
                raise

    def _evict_one(self) -> bool:
        """Close an idle connection (to any origin) to make room for a new one."""
        for idle in self._idle.values():
            if idle:
                self._drop(idle.pop(0))
                return True
        return False

    async def _connect(self, origin: Origin) -> Http1Connection:
        self._open += 1
        tls = self._context() if origin.scheme == "https" else None
        try:
            return await dial((origin.scheme, origin.host, origin.port), self._resolver, tls)
        except BaseException:
            self._open -= 1
            self._wake()
            raise

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    def _drop(self, connection: Http1Connection) -> None:
        connection.close()
        self._open -= 1

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

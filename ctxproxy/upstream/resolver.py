"""An upstream host's addresses, looked up once for all the connections made to it within ``ttl``.

aiohttp's client kept a lookup for ``ttl_dns_cache`` seconds (ctxproxy set 300, now ``[server]
upstream_dns_ttl``'s default); the pool (``ctxproxy.upstream.pool``) asks this cache for every new
connection it makes, and a kept connection asks nothing. The cache is per (host, port), holds at
most :data:`MAX_HOSTS` of them (the oldest is dropped first), and:

- a lookup under way is shared: the connections opened at once to one host wait for one lookup;
  it is not cancelled when the call that started it is (its connect timeout, a client gone);
- a failure is not kept: the next connection looks up again;
- the addresses come back as the system's resolver ordered them, rotated by one at each call (as
  aiohttp's cache handed them out), so successive connections start with each address in turn;
- an IP address (``127.0.0.1``, ``::1``) is not looked up at all.

The lookup is ``loop.getaddrinfo`` (a thread, as aiohttp's default resolver), or ``lookup`` given
to the constructor (a test counts its calls).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence

from aiohappyeyeballs import AddrInfoType

from ctxproxy.config.models import UPSTREAM_DNS_TTL

__all__ = ["AddrInfo", "Lookup", "Resolver", "system_lookup"]

MAX_HOSTS = 256  # (host, port) pairs kept at once
AddrInfo = AddrInfoType  # getaddrinfo's: (family, type, proto, canonname, sockaddr)
Lookup = Callable[[str, int], Awaitable[Sequence[AddrInfo]]]


async def system_lookup(host: str, port: int) -> Sequence[AddrInfo]:
    """The system resolver's TCP addresses for ``host`` (only families the machine has an address in)."""
    loop = asyncio.get_running_loop()
    return await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG)


class _Entry:
    __slots__ = ("addresses", "expires", "turn")

    def __init__(self, addresses: list[AddrInfo], expires: float) -> None:
        self.addresses = addresses
        self.expires = expires
        self.turn = 0


class Resolver:
    __slots__ = ("_ttl", "_lookup", "_entries", "_pending")

    def __init__(self, ttl: float = UPSTREAM_DNS_TTL, lookup: Lookup = system_lookup) -> None:
        self._ttl = ttl
        self._lookup = lookup
        self._entries: dict[tuple[str, int], _Entry] = {}
        self._pending: dict[tuple[str, int], asyncio.Task[list[AddrInfo]]] = {}

    async def addresses(self, host: str, port: int) -> Sequence[AddrInfo]:
        """``host``'s addresses, in the order to try them (module docstring); a failed lookup
        raises ``OSError`` (``socket.gaierror``) as ``getaddrinfo`` does."""
        literal = _literal(host, port)
        if literal is not None:
            return literal
        key = (host, port)
        entry = self._entries.get(key)
        loop = asyncio.get_running_loop()
        if entry is None or entry.expires <= loop.time():
            task = self._pending.get(key)
            if task is None:
                task = self._pending[key] = loop.create_task(self._look_up(key))
                task.add_done_callback(_seen)  # its failure is no error of the loop's when no call is left
            await asyncio.shield(task)
            entry = self._entries.get(key)
            if entry is None:  # kept for no time (a ttl of 0), or dropped meanwhile: this lookup's answer
                return list(task.result())
        return _turned(entry)

    def close(self) -> None:
        """Cancel the lookups under way (the pool closes)."""
        for task in self._pending.values():
            task.cancel()
        self._pending.clear()

    async def _look_up(self, key: tuple[str, int]) -> list[AddrInfo]:
        try:
            addresses = list(await self._lookup(*key))
            if not addresses:
                raise socket.gaierror(socket.EAI_NONAME, "no address")
        finally:
            if self._pending.get(key) is asyncio.current_task():
                del self._pending[key]
        if self._ttl > 0:
            self._keep(key, _Entry(addresses, asyncio.get_running_loop().time() + self._ttl))
        return addresses

    def _keep(self, key: tuple[str, int], entry: _Entry) -> None:
        entries = self._entries
        entries.pop(key, None)
        while len(entries) >= MAX_HOSTS:
            del entries[next(iter(entries))]  # the oldest lookup
        entries[key] = entry


def _seen(task: asyncio.Task[list[AddrInfo]]) -> None:
    if not task.cancelled():
        task.exception()


def _turned(entry: _Entry) -> list[AddrInfo]:
    addresses = entry.addresses
    turn = entry.turn % len(addresses)
    entry.turn = turn + 1
    return addresses[turn:] + addresses[:turn]


def _literal(host: str, port: int) -> Sequence[AddrInfo] | None:
    """The address ``host`` is, when it is an IP address (no lookup: ``AI_NUMERICHOST``)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)

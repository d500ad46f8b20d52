"""A new connection to an upstream, made as aiohttp's client made one, failing as it failed.

The host's addresses come from the pool's ``Resolver`` (cached, an IP address not looked up);
TCP goes to the first address that answers, trying them in order and starting the next one when
an attempt has had no answer for :data:`HAPPY_EYEBALLS_DELAY` (RFC 8305, with addresses of each
family in turn: ``aiohappyeyeballs``, aiohttp's own), so an address that refuses or does not answer
costs the next one a quarter of a second, not the connect timeout. Then TLS, for ``https``.

Failures are aiohttp's client's classes (``ctxproxy.upstream.client.translate`` names them):
``ClientConnectorDNSError`` when the host has no address, ``ClientConnectorError`` when no
address took the connection, ``ClientConnectorCertificateError`` when the upstream's certificate
fails verification (an unknown CA, an expired one, another host's name) and
``ClientConnectorSSLError`` for any other TLS failure. A TLS failure is not tried at the host's
other addresses (aiohttp's client did: they serve the same name, so the retry fails alike); a
connection reset during TLS is (the next address may be up).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import NoReturn

import aiohappyeyeballs
import aiohttp
from aiohttp.client_reqrep import ConnectionKey

from ctxproxy.upstream.http1 import Http1Connection
from ctxproxy.upstream.resolver import Resolver

__all__ = ["HAPPY_EYEBALLS_DELAY", "dial"]

HAPPY_EYEBALLS_DELAY = 0.25  # seconds before the next address is tried beside one not yet answering (aiohttp's)


async def dial(origin: tuple[str, str, int], resolver: Resolver, tls: ssl.SSLContext | None) -> Http1Connection:
    """A connection to ``origin`` (scheme, host, port), TLS when ``tls`` is given."""
    _, host, port = origin
    try:
        addresses = await resolver.addresses(host, port)
    except OSError as exc:
        raise aiohttp.ClientConnectorDNSError(_key(origin, tls), exc) from exc
    loop = asyncio.get_running_loop()
    while True:
        try:
            sock = await aiohappyeyeballs.start_connection(
                addresses, happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY, loop=loop
            )
        except OSError as exc:
            _raise(exc, origin, tls)
        peer = sock.getpeername()
        try:
            _, connection = await loop.create_connection(
                lambda: Http1Connection(loop, origin),
                sock=sock,
                ssl=tls,
                server_hostname=host.rstrip(".") if tls is not None else None,  # a certificate names no final dot
            )
        except OSError as exc:
            sock.close()
            addresses = [address for address in addresses if address[4] != peer]
            if isinstance(exc, ssl.SSLError) or not addresses:  # ssl.CertificateError is an SSLError
                _raise(exc, origin, tls)
            continue
        except BaseException:
            sock.close()
            raise
        return connection


def _raise(exc: OSError, origin: tuple[str, str, int], tls: ssl.SSLContext | None) -> NoReturn:
    """Raise ``exc`` as aiohttp's client raised it (a timeout of the system's stays one)."""
    if exc.errno is None and isinstance(exc, TimeoutError):
        raise exc
    key = _key(origin, tls)
    if isinstance(exc, ssl.CertificateError):
        raise aiohttp.ClientConnectorCertificateError(key, exc) from exc
    if isinstance(exc, ssl.SSLError):
        raise aiohttp.ClientConnectorSSLError(key, exc) from exc
    raise aiohttp.ClientConnectorError(key, exc) from exc


def _key(origin: tuple[str, str, int], tls: ssl.SSLContext | None) -> ConnectionKey:
    """What aiohttp's connection errors carry (host, port, TLS)."""
    return ConnectionKey(origin[1], origin[2], tls is not None, tls or True, None, None, None)

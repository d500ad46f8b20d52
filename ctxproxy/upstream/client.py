"""ctxproxy's HTTP to upstreams (``UpstreamHttp``) and the mapping of transport failures to errors.

One per process, opened and closed with the app, shared by every tenant: the connection pool
every call of ``ctxproxy.upstream.port`` goes through (``ctxproxy.upstream.pool``: ctxproxy's own
HTTP/1.1 client, which costs a call a third of what aiohttp's client did), and aiohttp's
``ClientSession`` for what is relayed as it is (the passthrough routes, the Responses WebSocket).
Neither keeps cookies, so a cookie an upstream sets in answer to one tenant's request is never
sent with another's or with a later one (a client's own ``Cookie`` header is forwarded as it came).

Timeouts are per tenant: ``connect`` bounds connection setup and ``sock_read`` bounds every wait
for bytes, so a stream that stalls is cut while a long stream that keeps flowing is not.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import lru_cache
from types import TracebackType

import aiohttp

from ctxproxy.config.models import UPSTREAM_DNS_TTL, UpstreamConfig
from ctxproxy.errors import ProxyError, UpstreamTimeout, UpstreamUnavailable
from ctxproxy.upstream.pool import POOL_LIMIT, Pool
from ctxproxy.upstream.resolver import Resolver


@dataclass(frozen=True, slots=True)
class UpstreamHttp:
    pool: Pool  # every call of the port
    session: aiohttp.ClientSession  # what is relayed as it is

    async def close(self) -> None:
        self.pool.close()
        await self.session.close()


async def open_session(dns_ttl: int = UPSTREAM_DNS_TTL) -> UpstreamHttp:
    """``dns_ttl``: seconds a host's addresses are kept for new connections (``[server] upstream_dns_ttl``)."""
    return UpstreamHttp(Pool(resolver=Resolver(dns_ttl)), _relay_session(dns_ttl))


def _relay_session(dns_ttl: int) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=POOL_LIMIT, limit_per_host=0, ttl_dns_cache=dns_ttl)
    # No session-wide timeout: each request carries its tenant's.
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None),
        auto_decompress=True,
        cookie_jar=aiohttp.DummyCookieJar(),
        skip_auto_headers=("User-Agent",),
    )


def timeout_for(upstream: UpstreamConfig) -> aiohttp.ClientTimeout:
    return _timeout(upstream.connect_timeout, upstream.read_timeout)


@lru_cache(maxsize=64)
def _timeout(connect: float, read: float) -> aiohttp.ClientTimeout:
    """One (immutable) timeout per pair of values, not one per request."""
    return aiohttp.ClientTimeout(total=None, connect=connect, sock_read=read)


def failure_reason(exc: BaseException) -> str:
    """What kind of transport failure ``exc`` is: ``timeout``, ``connection`` (could not connect)
    or ``transport`` (the connection failed on the way)."""
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
        return "timeout"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connection"
    return "transport"


def translate(exc: BaseException, upstream: UpstreamConfig) -> ProxyError:
    """The client-facing error for a transport failure (details stay in the log)."""
    reason = failure_reason(exc)
    error = type(exc).__name__  # its message may hold a URL: the log gets the type only
    if reason == "timeout":
        return UpstreamTimeout(
            f"The upstream did not answer in time (connect_timeout {upstream.connect_timeout:g}s, "
            f"read_timeout {upstream.read_timeout:g}s).",
            cause=f"the upstream did not answer in time ({error})",
        )
    if reason == "connection":
        return _unreachable(exc, error)
    return UpstreamUnavailable(
        "The upstream closed the connection before answering.",
        cause=f"the upstream closed the connection ({error})",
    )


def _unreachable(exc: BaseException, error: str) -> ProxyError:
    """Could not connect: a certificate refused and a TLS failure are named as such."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return UpstreamUnavailable(
            "Could not connect to the upstream: its TLS certificate failed verification (an unknown CA, "
            "an expired certificate or another host's name); check upstream.base_url's host.",
            cause=f"could not connect to the upstream: its certificate failed verification ({error})",
        )
    if isinstance(exc, aiohttp.ClientConnectorSSLError):
        return UpstreamUnavailable(
            "Could not connect to the upstream: the TLS handshake failed; check that upstream.base_url's "
            "scheme and port are the upstream's.",
            cause=f"could not connect to the upstream: the TLS handshake failed ({error})",
        )
    return UpstreamUnavailable(
        "Could not connect to the upstream; check upstream.base_url and that it is running.",
        cause=f"could not connect to the upstream ({error})",
    )


TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)


class upstream_errors:  # noqa: N801 - used as a function: ``with upstream_errors(upstream):``
    """Transport failures within the block raise as ``translate`` says (a class: no generator per call)."""

    __slots__ = ("_upstream",)

    def __init__(self, upstream: UpstreamConfig) -> None:
        self._upstream = upstream

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if exc is not None and isinstance(exc, TRANSPORT_ERRORS):
            raise translate(exc, self._upstream) from exc


async def request_body_chunks(content: aiohttp.StreamReader, size: int = 1 << 16) -> AsyncIterator[bytes]:
    async for chunk in content.iter_chunked(size):
        yield chunk

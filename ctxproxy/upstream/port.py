"""The one way ctxproxy posts to a tenant's upstream: ``UpstreamPort.post``.

A chat request forwarded, every round of the proxy-tool loop, the LLM summariser's and the page
lines' calls, and embeddings all go through here, so each rule is written once:

- URL: ``base_url`` + the path + the client's query exactly as it was encoded, refused when the
  path could leave ``/v1`` (``upstream_url``).
- Headers: the client's, hop-by-hop and ``X-Ctx-*`` ones dropped; the tenant's key, when it has
  one, in the header the protocol carries a key in (``KeyHeader``; OpenAI's is ``BEARER``) in
  place of the client's own; the tenant's extra headers; ``Content-Type`` unless one is set.
  A call ctxproxy makes on its own sends only ``Accept`` and the client's credential as client
  headers (embeddings: ``own_call_headers``; summaries and page lines also what their protocol
  requires: ``ctxproxy.upstream.completion``).
- Time: each call, the block included, is time the request waited on others, and the arrival of
  its answer's headers is its first byte (``ctxproxy.stopwatch``).
- Timeouts: the tenant's ``connect_timeout`` (a connection from the pool, set up when none is
  idle) and ``read_timeout`` (every wait for bytes) on every call; a call with a ``deadline``
  also ends when it passes, reading included.
- Connections: kept alive and reused through ``ctxproxy.upstream.pool``; one whose answer was not
  read to its end when the block ends is closed, never reused.
- Errors: a transport failure while sending, or while reading through ``read`` / ``errors``,
  becomes ``UpstreamTimeout`` or ``UpstreamUnavailable`` (``translate``), whoever calls; so does a
  passed deadline. The caller decides what a failure means (the chat handler answers the client
  with it; the summariser falls back, logging ``transport_failure``).

The port sends bytes (the request's head built and checked by ``ctxproxy.upstream.request_head``,
a spliced body as its pieces: ``ctxproxy.upstream.body``) and hands back the response
(``ctxproxy.upstream.http1.UpstreamResponse``): it knows no protocol's body.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import NamedTuple

from multidict import CIMultiDict, CIMultiDictProxy

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.errors import ProxyError, UpstreamTimeout
from ctxproxy.stopwatch import UpstreamSpan
from ctxproxy.upstream.body import Outgoing, buffers
from ctxproxy.upstream.client import TRANSPORT_ERRORS, UpstreamHttp, failure_reason, translate, upstream_errors
from ctxproxy.upstream.headers import BEARER, KeyHeader, upstream_request_headers, upstream_target
from ctxproxy.upstream.http1 import Http1Connection, UpstreamResponse
from ctxproxy.upstream.request_head import request_head

__all__ = ["TransportFailure", "UpstreamPort", "transport_failure"]

ClientHeaders = CIMultiDictProxy[str] | CIMultiDict[str]
# Sent unless set, as aiohttp's client sent them (the answer's coding is undone by the parser).
AUTO_HEADERS = (("Accept", "*/*"), ("Accept-Encoding", "gzip, deflate"))


@dataclass(frozen=True)
class UpstreamPort:
    http: UpstreamHttp
    upstream: UpstreamConfig
    key_header: KeyHeader = BEARER

    def post(
        self,
        path: str,
        body: Outgoing,
        client_headers: ClientHeaders,
        *,
        raw_query: str = "",
        deadline: float | None = None,
        content_type: str = "application/json",
    ) -> AbstractAsyncContextManager[UpstreamResponse]:
        """``POST {base_url}{path}``; the response, closed when the block ends.

        ``raw_query``: the client's query as it encoded it; ``deadline``: seconds the whole call
        may take, the block included. Transport failures while sending raise ``ProxyError``s;
        reading is the caller's, through ``read`` or within ``errors()``."""
        call = _Call(self, path, body, client_headers, raw_query, content_type)
        return call if deadline is None else _within(deadline, call)

    async def read(self, response: UpstreamResponse) -> bytes:
        """The whole body; a transport failure raises as when sending."""
        with self.errors():
            return await response.read()

    def errors(self) -> AbstractContextManager[None]:
        """Transport failures within the block raise as when sending."""
        return upstream_errors(self.upstream)

    def own_call_headers(self, credential: str | None) -> CIMultiDict[str]:
        """The client headers of a call ctxproxy makes on its own: a JSON answer is wanted, and the
        client's ``credential`` (its key header's value) is sent when the tenant has no key."""
        headers = CIMultiDict({"Accept": "application/json"})
        if credential:
            headers[self.key_header.name] = credential
        return headers


class _Call:
    """One call, from sending to the response closed: ``post``'s block, as a class (a generator's
    context managers cost a request a few microseconds more)."""

    __slots__ = ("_port", "_path", "_body", "_headers", "_query", "_content_type", "_span", "_response")

    def __init__(
        self, port: UpstreamPort, path: str, body: Outgoing, headers: ClientHeaders, query: str, content_type: str
    ) -> None:
        self._port, self._path, self._body = port, path, body
        self._headers, self._query, self._content_type = headers, query, content_type

    async def __aenter__(self) -> UpstreamResponse:
        port = self._port
        upstream = port.upstream
        headers = upstream_request_headers(self._headers, upstream, decode_body=True, key_header=port.key_header)
        headers.setdefault("Content-Type", self._content_type)
        for name, value in AUTO_HEADERS:
            headers.setdefault(name, value)
        origin, target = upstream_target(upstream, self._path, self._query)
        body = self._body
        head = request_head(target, headers.pop("Host", origin.host_header), headers, len(body))
        span = self._span = UpstreamSpan()
        span.enter()
        pool = port.http.pool
        connection: Http1Connection | None = None
        try:
            connection = pool.take(origin) or await pool.acquire(origin, upstream.connect_timeout)
            message, content = await connection.send(buffers(head, body), upstream.read_timeout)
        except BaseException as exc:
            if connection is not None:
                pool.release(connection)  # closed: its answer never came
            span.leave()
            if isinstance(exc, TRANSPORT_ERRORS):
                raise translate(exc, upstream) from exc
            raise
        span.answered()
        response = self._response = UpstreamResponse(connection, message, content)
        return response

    async def __aexit__(self, *exc: object) -> None:
        try:
            self._port.http.pool.release(self._response.release())  # kept when its answer was read to its end
        finally:
            self._span.leave()


@asynccontextmanager
async def _within(deadline: float, call: _Call) -> AsyncIterator[UpstreamResponse]:
    timeout = asyncio.timeout(deadline)
    try:
        async with timeout, call as response:
            yield response
    except TimeoutError as exc:
        if not timeout.expired():
            raise
        raise UpstreamTimeout(f"The upstream did not answer within {deadline:g}s.") from exc


class TransportFailure(NamedTuple):
    reason: str  # "timeout", "connection" (could not connect) or "transport"
    error: str  # the class name of the transport error (its message may hold a URL: never logged)


def transport_failure(error: ProxyError) -> TransportFailure:
    """What failed, for a caller that logs a failure of the port's instead of answering with it."""
    cause = error.__cause__ if error.__cause__ is not None else error
    return TransportFailure(failure_reason(cause), type(cause).__name__)

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
- Timeouts: the tenant's ``connect_timeout`` and ``read_timeout`` on every call
  (``timeout_for``); a call with a ``deadline`` also ends when it passes, reading included.
- Errors: a transport failure while sending, or while reading through ``read`` / ``errors``,
  becomes ``UpstreamTimeout`` or ``UpstreamUnavailable`` (``translate``), whoever calls; so does a
  passed deadline. The caller decides what a failure means (the chat handler answers the client
  with it; the summariser falls back, logging ``transport_failure``).

The port sends bytes (a spliced body as its pieces: ``ctxproxy.upstream.body``) and hands back the
response: it knows no protocol's body.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import NamedTuple

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.errors import ProxyError, UpstreamTimeout
from ctxproxy.stopwatch import UpstreamSpan
from ctxproxy.upstream.body import Outgoing, payload
from ctxproxy.upstream.client import TRANSPORT_ERRORS, failure_reason, timeout_for, translate, upstream_errors
from ctxproxy.upstream.headers import BEARER, KeyHeader, upstream_request_headers, upstream_url

__all__ = ["TransportFailure", "UpstreamPort", "transport_failure"]

ClientHeaders = CIMultiDictProxy[str] | CIMultiDict[str]


@dataclass(frozen=True)
class UpstreamPort:
    http: aiohttp.ClientSession
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
    ) -> AbstractAsyncContextManager[aiohttp.ClientResponse]:
        """``POST {base_url}{path}``; the response, closed when the block ends.

        ``raw_query``: the client's query as it encoded it; ``deadline``: seconds the whole call
        may take, the block included. Transport failures while sending raise ``ProxyError``s;
        reading is the caller's, through ``read`` or within ``errors()``."""
        call = _Call(self, path, body, client_headers, raw_query, content_type)
        return call if deadline is None else _within(deadline, call)

    async def read(self, response: aiohttp.ClientResponse) -> bytes:
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

    async def __aenter__(self) -> aiohttp.ClientResponse:
        port = self._port
        upstream = port.upstream
        headers = upstream_request_headers(self._headers, upstream, decode_body=True, key_header=port.key_header)
        data = payload(self._body, headers.setdefault("Content-Type", self._content_type))
        url = upstream_url(upstream, self._path, self._query)
        span = self._span = UpstreamSpan()
        span.enter()
        try:
            response = await port.http.post(url, data=data, headers=headers, timeout=timeout_for(upstream))
        except TRANSPORT_ERRORS as exc:
            span.leave()
            raise translate(exc, upstream) from exc
        except BaseException:
            span.leave()
            raise
        span.answered()
        self._response = response
        return response

    async def __aexit__(self, *exc: object) -> None:
        try:
            self._response.close()
        finally:
            self._span.leave()


@asynccontextmanager
async def _within(deadline: float, call: _Call) -> AsyncIterator[aiohttp.ClientResponse]:
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

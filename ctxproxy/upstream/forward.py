"""Forwarding one request body upstream and relaying the answer, or reporting an overflow.

The sequence every protocol follows, written once: post through the ``UpstreamPort``; a 200
event stream is read with one timer for the tenant's ``read_timeout`` (``idle.StreamRead``) and
opened by the rule of ``opening`` (``Overflow`` when it is refused as too long
before any content, else relayed event by event: ``relay.relay_events``); any other answer is read
whole, and an error status whose body says the prompt is too long is ``Overflow``, anything else
is relayed as it came (``relay.relay_body``). A protocol brings its pieces (``Forwarding``): its
path, what its events are, how its stream is framed and ended, and what reads its answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ctxproxy.upstream.body import Outgoing
from ctxproxy.upstream.idle import StreamRead
from ctxproxy.upstream.opening import EventKinds, open_stream
from ctxproxy.upstream.overflow import Overflow, is_context_overflow
from ctxproxy.upstream.overflow_numbers import overflow_numbers
from ctxproxy.upstream.port import ClientHeaders, UpstreamPort
from ctxproxy.upstream.relay import Ending, Tap, relay_body, relay_events
from ctxproxy.upstream.sse import EventFramer

__all__ = ["Forwarding", "Sent", "forward"]

Sent = tuple[ClientHeaders, str]  # a client's headers and its raw query, as they go upstream


@dataclass(frozen=True)
class Forwarding:
    """One protocol's pieces for forwarding one request (``framer``, ``end`` and ``tap`` keep the
    state of this answer: new ones for every request)."""

    path: str  # after the upstream's base_url
    kinds: EventKinds
    framer: EventFramer
    end: Ending
    tap: Tap


async def forward(
    request: web.Request,
    port: UpstreamPort,
    body: Outgoing,
    stream: bool,
    ctx_headers: Mapping[str, str],
    how: Forwarding,
    log_fields: dict[str, Any],
    *,
    client: Sent | None = None,
) -> web.StreamResponse | Overflow:
    """Post ``body`` to ``how.path`` with the client's headers and query; relay the answer with
    ``ctx_headers`` added, or report the overflow it states before anything reached the client.
    ``log_fields``: the request's log line, which gets the upstream's status. ``client``: the
    headers and query to send in place of the request's (a protocol that moves a key out of the query)."""
    headers, query = client if client is not None else (request.headers, request.rel_url.raw_query_string)
    async with port.post(how.path, body, headers, raw_query=query) as up:
        log_fields["upstream_status"] = up.status
        if stream and up.status == 200 and up.content_type == "text/event-stream":
            read = StreamRead(up, port.upstream.read_timeout)
            try:
                with port.errors():
                    opened = await open_stream(read, how.framer, how.kinds)
                if isinstance(opened, Overflow):
                    return opened
                return await relay_events(
                    request, up, ctx_headers, port.upstream, first=opened, framer=how.framer, tap=how.tap, end=how.end,
                    content=read,
                )  # fmt: skip
            finally:
                read.close()
        answer = await port.read(up)
        if up.status >= 400 and is_context_overflow(up.status, answer):
            return Overflow(overflow_numbers(answer))
        if up.status == 200:
            how.tap.see_json(answer)
        return await relay_body(up, answer, ctx_headers)

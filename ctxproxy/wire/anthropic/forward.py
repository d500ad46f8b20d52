"""Posting a Messages body upstream and relaying the answer, or reporting an overflow.

The tenant's key goes in ``x-api-key`` and replaces whatever key the client sent, in ``x-api-key``
or as ``Authorization: Bearer`` (what the anthropic SDK 2.x sends); without a tenant key the
client's credentials pass as they came. ``anthropic-version`` and ``anthropic-beta`` pass like
every other client header.

A streamed answer's first events are read before anything goes to the client, so that an
overflow ``error`` event at its start (before any content block) can still be met by compacting
and retrying; after that the stream is relayed event by event (``relay_events``, framed and ended
as ``ctxproxy.wire.anthropic.relay`` says), and an overflow event later in it, after content, is
relayed like any error, never retried.

The prompt's size is what the answer's usage says: ``input_tokens`` plus the tokens written to
and read from the prompt cache (``message_start``'s, replaced by any later ``message_delta``'s).
It is marked ``cached`` when part of it was read from the cache.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp
import orjson
from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.pipeline.wire import Relayed
from ctxproxy.services import LOG_FIELDS
from ctxproxy.upstream.headers import KeyHeader
from ctxproxy.upstream.overflow import Overflow, is_context_overflow, sse_error_is_overflow
from ctxproxy.upstream.overflow_numbers import overflow_numbers
from ctxproxy.upstream.port import UpstreamPort
from ctxproxy.upstream.relay import first_events, relay_body, relay_events
from ctxproxy.upstream.usage import plausible_tokens
from ctxproxy.wire.anthropic.relay import MessagesEnd, MessagesFramer
from ctxproxy.wire.anthropic.sse import Usage, parse_events, usage_of

__all__ = ["API_KEY", "MESSAGES_PATH", "forward_messages", "overflow_event", "relayed"]

API_KEY = KeyHeader("x-api-key", replaces=("Authorization",))
MESSAGES_PATH = "/messages"
_PREAMBLE = frozenset({"message_start", "ping"})  # events before a stream's content


async def forward_messages(
    request: web.Request,
    http: aiohttp.ClientSession,
    tenant: TenantConfig,
    body: bytes,
    stream: bool,
    ctx_headers: Mapping[str, str],
) -> Relayed | Overflow:
    port = UpstreamPort(http, tenant.upstream, key_header=API_KEY)
    query = request.rel_url.raw_query_string
    async with port.post(MESSAGES_PATH, body, request.headers, raw_query=query) as up:
        request[LOG_FIELDS]["upstream_status"] = up.status
        if stream and up.status == 200 and up.content_type == "text/event-stream":
            framer = MessagesFramer()
            with port.errors():
                first = await first_events(up, framer)
            refusal = overflow_event(first)
            if refusal is not None:
                return Overflow(overflow_numbers(refusal))
            end = MessagesEnd()
            response = await relay_events(
                request, up, ctx_headers, tenant.upstream, first=first, framer=framer, end=end
            )
            return relayed(response, end.state.usage)
        answer = await port.read(up)
        if up.status >= 400 and is_context_overflow(up.status, answer):
            return Overflow(overflow_numbers(answer))
        usage = _json_usage(answer) if up.status == 200 else Usage()
        return relayed(await relay_body(up, answer, ctx_headers), usage)


def overflow_event(events: bytes) -> bytes | None:
    """The data of an ``error`` event that says the prompt is too long and opens the stream (only
    ``message_start`` and ``ping`` before it). One after content is relayed, never retried: how
    many events the first read holds depends on how the bytes arrived."""
    for event in parse_events(events):
        if event.kind == "error":
            return event.data if sse_error_is_overflow(event.data) else None
        if event.kind not in _PREAMBLE:
            return None
    return None


def _json_usage(answer: bytes) -> Usage:
    try:
        message = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return Usage()
    usage = usage_of(message.get("usage")) if isinstance(message, dict) else None
    return usage or Usage()


def relayed(response: web.StreamResponse, usage: Usage) -> Relayed:
    """The answer, with its prompt's size when the upstream counted it (a server that does not
    count reports 0)."""
    prompt = usage.prompt_tokens
    if not plausible_tokens(prompt):
        return Relayed(response)
    return Relayed(response, prompt, cached=(usage.cache_read_input_tokens or 0) > 0)

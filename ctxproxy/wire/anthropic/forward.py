"""Posting a Messages body upstream and relaying the answer, or reporting an overflow.

The tenant's key goes in ``x-api-key`` and replaces whatever key the client sent, in ``x-api-key``
or as ``Authorization: Bearer`` (what the anthropic SDK 2.x sends); without a tenant key the
client's credentials pass as they came. ``anthropic-version`` and ``anthropic-beta`` pass like
every other client header.

The sequence is ``ctxproxy.upstream.forward``'s; the Messages API brings its path, its key
header, its stream's events (``relay.MESSAGES_EVENTS``: an overflow ``error`` event before the
first content block, after ``message_start`` and ``ping`` only, is compacted and retried; one
after content is relayed), its framing and ending (``relay``), and the reading of its usage.

The prompt's size is what the answer's usage says: ``input_tokens`` plus the tokens written to
and read from the prompt cache (``message_start``'s, replaced by any later ``message_delta``'s).
That sum is the whole prompt however much of it the cache served, so every answer that reports it
is a sample of how Claude counts (``Relayed.prompt_tokens_partial`` stays False).
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.pipeline.wire import Relayed
from ctxproxy.services import LOG_FIELDS
from ctxproxy.tools.calls import json_object
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.forward import Forwarding, forward
from ctxproxy.upstream.headers import KeyHeader
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.upstream.port import UpstreamPort
from ctxproxy.upstream.relay import AnswerUsage
from ctxproxy.upstream.usage import plausible_tokens
from ctxproxy.wire.anthropic.relay import MESSAGES_EVENTS, MessagesEnd, MessagesFramer
from ctxproxy.wire.anthropic.sse import Usage, usage_of

__all__ = ["API_KEY", "MESSAGES_PATH", "forward_messages", "relayed"]

API_KEY = KeyHeader("x-api-key", replaces=("Authorization",))
MESSAGES_PATH = "/messages"


async def forward_messages(
    request: web.Request,
    http: UpstreamHttp,
    tenant: TenantConfig,
    body: bytes,
    stream: bool,
    ctx_headers: Mapping[str, str],
) -> Relayed | Overflow:
    end = MessagesEnd()
    usage = AnswerUsage(_json_usage, lambda: end.state.usage)
    how = Forwarding(MESSAGES_PATH, MESSAGES_EVENTS, MessagesFramer(), end, usage)
    port = UpstreamPort(http, tenant.upstream, key_header=API_KEY)
    answer = await forward(request, port, body, stream, ctx_headers, how, request[LOG_FIELDS])
    return answer if isinstance(answer, Overflow) else relayed(answer, usage.usage)


def _json_usage(answer: bytes) -> Usage:
    message = json_object(answer)
    return (usage_of(message.get("usage")) if message is not None else None) or Usage()


def relayed(response: web.StreamResponse, usage: Usage) -> Relayed:
    """The answer, with its prompt's size when the upstream counted it (a server that does not
    count reports 0) and the part of it read from the cache; never partial (the module)."""
    prompt = usage.prompt_tokens
    if not plausible_tokens(prompt):
        return Relayed(response)
    return Relayed(response, prompt, cached_tokens=usage.cache_read_input_tokens)

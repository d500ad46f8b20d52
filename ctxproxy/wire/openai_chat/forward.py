"""Posting a chat completions body upstream and relaying the answer, or reporting an overflow.

The sequence is ``ctxproxy.upstream.forward``'s; chat completions bring their path, their stream's
events (``sse.CHAT_EVENTS``: an overflow error event before the first content delta is compacted
and retried, one after it relayed), its framing and ``[DONE]`` ending, and the ``UsageTap`` that
reads the answer's usage.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.services import LOG_FIELDS
from ctxproxy.upstream.body import Outgoing
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.forward import Forwarding, forward
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.upstream.port import UpstreamPort
from ctxproxy.upstream.sse import CHAT_EVENTS, EventFramer, StreamEnd
from ctxproxy.upstream.usage import UsageTap
from ctxproxy.vocabulary import CHAT_COMPLETIONS_PATH


async def forward_chat(
    request: web.Request,
    http: UpstreamHttp,
    tenant: TenantConfig,
    body: Outgoing,
    stream: bool,
    ctx_headers: Mapping[str, str],
    tap: UsageTap,
) -> web.StreamResponse | Overflow:
    how = Forwarding(CHAT_COMPLETIONS_PATH, CHAT_EVENTS, EventFramer(), StreamEnd(), tap)
    port = UpstreamPort(http, tenant.upstream)
    return await forward(request, port, body, stream, ctx_headers, how, request[LOG_FIELDS])

"""``POST /v1/chat/completions``: parse, identify the session, count, forward, relay."""

from __future__ import annotations

import time

import aiohttp
import orjson
import structlog
from aiohttp import web

from proxy.compaction.engine import CompactionInput
from proxy.compaction.windows import window_for
from proxy.config.models import TenantConfig
from proxy.errors import BodyTooLarge
from proxy.server.chat_body import parse_body
from proxy.server.conversation import identify
from proxy.server.keys import COMPACTOR, CONFIG, HTTP, KNOWN, LOG_FIELDS, RECORDER, TOKENS
from proxy.server.tenancy import resolve_tenant
from proxy.session.identity import SESSION_HEADER
from proxy.session.records import Observation
from proxy.upstream.client import timeout_for, upstream_errors
from proxy.upstream.headers import upstream_request_headers, upstream_url
from proxy.upstream.relay import relay_body, relay_events

log = structlog.get_logger(__name__)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    app = request.app
    config = app[CONFIG].current
    fields = request[LOG_FIELDS]
    tenant = resolve_tenant(config, request.match_info.get("tenant"), request.headers.get("Authorization"))
    fields["tenant"] = tenant.name
    chat = parse_body(await read_body(request, config.settings.server.max_body_bytes))

    counter = app[TOKENS]
    found = identify(chat, tenant.name, request.headers.get(SESSION_HEADER), counter, app[KNOWN])
    key, chain, per_message = found.key, found.chain, found.tokens
    tools = counter.count_tools(chat.body.get("tools"), chat.model)
    before = sum(per_message) + 3 + tools
    fields.update(session=key.value, model=chat.model, stream=chat.stream, tokens_before=before)
    seen = Observation(time.time(), len(chat.messages), before, chain.head.hex(), chat.model)
    ttl = config.settings.store.session_ttl_days * 86400
    app[RECORDER].observe(key, seen, ttl)

    outcome = await app[COMPACTOR].prepare(
        CompactionInput(
            tenant=tenant,
            key=key,
            messages=chat.messages,
            chain=chain,
            tokens=per_message,
            model=chat.model,
            window=window_for(chat.model, chat.body, tenant),
            authorization=request.headers.get("Authorization"),
        )
    )
    body = chat.raw if outcome.messages is None else orjson.dumps({**chat.body, "messages": outcome.messages})
    after = outcome.tokens_after + tools
    fields.update(tokens_after=after, compacted=outcome.compacted)
    ctx_headers = {
        "X-Ctx-Session": key.value,
        "X-Ctx-Strategy": tenant.compaction.strategy,
        "X-Ctx-Tokens-Before": str(before),
        "X-Ctx-Tokens-After": str(after),
    }
    if outcome.checkpoint is not None:
        # The first k messages are represented by the summary (their system messages still go verbatim).
        ctx_headers["X-Ctx-Summarized"] = str(outcome.checkpoint.end)
    if outcome.compacted:
        ctx_headers["X-Ctx-Compacted"] = "1"
    return await forward_chat(request, app[HTTP], tenant, body, chat.stream, ctx_headers)


async def forward_chat(
    request: web.Request,
    http: aiohttp.ClientSession,
    tenant: TenantConfig,
    body: bytes,
    stream: bool,
    ctx_headers: dict[str, str],
) -> web.StreamResponse:
    headers = upstream_request_headers(request.headers, tenant, decode_body=True)
    headers.setdefault("Content-Type", "application/json")
    url = upstream_url(tenant, "/chat/completions", request.rel_url.raw_query_string)
    with upstream_errors(tenant.upstream):
        up = await http.post(url, data=body, headers=headers, timeout=timeout_for(tenant.upstream))
    request[LOG_FIELDS]["upstream_status"] = up.status
    try:
        if stream and up.status == 200 and up.content_type == "text/event-stream":
            return await relay_events(request, up, ctx_headers, tenant.upstream)
        with upstream_errors(tenant.upstream):
            answer = await up.read()
        return await relay_body(up, answer, ctx_headers)
    finally:
        up.close()


async def read_body(request: web.Request, limit: int) -> bytes:
    """The whole body, refusing early (before reading it) when it is declared too large."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(declared, limit)
    data = bytearray()
    async for chunk in request.content.iter_any():
        data += chunk
        if len(data) > limit:
            raise _too_large(len(data), limit)
    return bytes(data)


def _too_large(size: int, limit: int) -> BodyTooLarge:
    return BodyTooLarge(
        f"The request body ({size} bytes) exceeds the proxy's limit of {limit} bytes "
        "(server.max_body_bytes in proxy.toml)."
    )

"""``POST /v1/responses`` and ``POST /v1/responses/compact``: OpenAI's Responses API, answered by its
wire package (``ctxproxy.wire.openai_responses.entry``: parsed, run through the pipeline; remote
compaction served by ctxproxy).

Clients send their key as ``Authorization: Bearer``, which selects a tenant by its ``api_keys``
as on the chat route; errors are OpenAI-shaped. ``/v1/responses/compact`` is relayed as it is when
the tenant's upstream compacts itself (``[upstream] responses_compaction``); every other
``/v1/responses/...`` path is relayed as it is (``server.passthrough``), and so is a ``GET`` of
``/v1/responses``, the WebSocket transport included (``wire.openai_responses.websocket``).
"""

from __future__ import annotations

from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.server.chat import read_body
from ctxproxy.server.middleware import note_tenant
from ctxproxy.server.passthrough import passthrough
from ctxproxy.server.request_headers import check_request_headers
from ctxproxy.server.tenancy import resolve_tenant
from ctxproxy.services import CONFIG
from ctxproxy.wire.openai_responses.compaction_serve import serves_compaction
from ctxproxy.wire.openai_responses.entry import answer_compact, answer_responses
from ctxproxy.wire.openai_responses.websocket import is_websocket, relay_websocket


async def responses(request: web.Request) -> web.StreamResponse:
    tenant = _tenant(request)
    raw = await read_body(request, request.app[CONFIG].current.settings.server.max_body_bytes)
    return await answer_responses(request, tenant, raw)


async def responses_socket(request: web.Request) -> web.StreamResponse:
    """``GET /v1/responses``: the WebSocket transport, relayed; any other GET, relayed as it is."""
    if not is_websocket(request):
        return await passthrough(request)
    return await relay_websocket(request, _tenant(request))


async def compact(request: web.Request) -> web.StreamResponse:
    tenant = _tenant(request)
    if not serves_compaction(tenant.upstream):
        return await passthrough(request)
    raw = await read_body(request, request.app[CONFIG].current.settings.server.max_body_bytes)
    return await answer_compact(request, tenant, raw)


def _tenant(request: web.Request) -> TenantConfig:
    check_request_headers(request.headers)
    config = request.app[CONFIG].current
    tenant = resolve_tenant(config, request.match_info.get("tenant"), request.headers.get("Authorization"))
    note_tenant(request, tenant.name)
    return tenant

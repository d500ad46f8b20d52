"""``POST /v1/responses``: OpenAI's Responses API, parsed by its wire adapter, run through the pipeline.

Clients send their key as ``Authorization: Bearer``, which selects a tenant by its ``api_keys``
as on the chat route; errors are OpenAI-shaped. Every other ``/v1/responses/...`` path (and a
``GET`` of ``/v1/responses``) is relayed as it is (``server.passthrough``).
"""

from __future__ import annotations

from aiohttp import web

from ctxproxy.pipeline.run import run_turn
from ctxproxy.server.chat import read_body
from ctxproxy.server.middleware import note_tenant
from ctxproxy.server.request_headers import check_request_headers
from ctxproxy.server.tenancy import resolve_tenant
from ctxproxy.services import CONFIG
from ctxproxy.wire.openai_responses import OPENAI_RESPONSES
from ctxproxy.wire.openai_responses.body import parse_turn


async def responses(request: web.Request) -> web.StreamResponse:
    check_request_headers(request.headers)
    config = request.app[CONFIG].current
    tenant = resolve_tenant(config, request.match_info.get("tenant"), request.headers.get("Authorization"))
    note_tenant(request, tenant.name)
    turn = parse_turn(await read_body(request, config.settings.server.max_body_bytes))
    return await run_turn(request, tenant, OPENAI_RESPONSES, turn)

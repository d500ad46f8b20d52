"""``POST /v1/messages``: Anthropic's Messages API, parsed by its wire adapter, run through the
pipeline; errors answered in Anthropic's shape (``{"type": "error", "error": {...}}``).

Clients send their key as ``x-api-key`` (or, as the anthropic SDK 2.x does, ``Authorization:
Bearer``); either selects a tenant by its ``api_keys`` like ``Authorization`` does on the chat
route. ``/v1/messages/count_tokens`` and every other path are relayed as they are (errors
ctxproxy answers there itself are Anthropic-shaped too: ``ctxproxy.wire.keys``).
"""

from __future__ import annotations

from aiohttp import web

from ctxproxy.pipeline.run import run_turn
from ctxproxy.server.chat import read_body
from ctxproxy.server.middleware import note_tenant
from ctxproxy.server.render import error_renderer
from ctxproxy.server.request_headers import check_request_headers
from ctxproxy.server.tenancy import resolve_tenant
from ctxproxy.services import CONFIG, ERROR_RESPONSE
from ctxproxy.session.identity import SESSION_HEADER
from ctxproxy.wire.anthropic.adapter import AnthropicMessages, parse_turn
from ctxproxy.wire.anthropic.errors import error_json
from ctxproxy.wire.anthropic.forward import API_KEY
from ctxproxy.wire.incremental import BODIES

ANTHROPIC_MESSAGES = AnthropicMessages()
ANTHROPIC_ERRORS = error_renderer(error_json)


async def messages(request: web.Request) -> web.StreamResponse:
    request[ERROR_RESPONSE] = ANTHROPIC_ERRORS
    check_request_headers(request.headers)
    config = request.app[CONFIG].current
    credential = API_KEY.client_authorization(request.headers)
    tenant = resolve_tenant(config, request.match_info.get("tenant"), credential, API_KEY)
    note_tenant(request, tenant.name)
    load = request.app[BODIES].loader(tenant.name, request.headers.get(SESSION_HEADER))
    turn = parse_turn(await read_body(request, config.settings.server.max_body_bytes), load)
    return await run_turn(request, tenant, ANTHROPIC_MESSAGES, turn)

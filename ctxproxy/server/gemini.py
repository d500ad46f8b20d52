"""Gemini's API: ``POST …/models/{model}:generateContent`` and ``:streamGenerateContent``, under
``/v1beta`` and ``/v1`` (the ``google-genai`` SDK's default), parsed by its wire adapter and run
through the pipeline; every other Gemini path (``:countTokens``, ``/v1beta/models``, files,
cached contents …) relayed as it is. Errors, ctxproxy's own included, are Google-shaped
(``{"error": {"code", "message", "status"}}``).

Clients send their key as ``x-goog-api-key`` or as ``?key=``; either selects a tenant by its
``api_keys`` as ``Authorization`` does on the chat route. The key never goes upstream in the
URL (``ctxproxy.wire.gemini.forward``), and the tenant's key replaces the client's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from ctxproxy.pipeline.run import run_turn
from ctxproxy.server.chat import read_body
from ctxproxy.server.middleware import note_tenant
from ctxproxy.server.passthrough import raw_tail, relay_as
from ctxproxy.server.render import error_renderer
from ctxproxy.server.request_headers import check_request_headers
from ctxproxy.server.tenancy import resolve_tenant
from ctxproxy.services import CONFIG, ERROR_RESPONSE
from ctxproxy.session.identity import SESSION_HEADER
from ctxproxy.wire.gemini.adapter import GeminiGenerate
from ctxproxy.wire.gemini.body import CONTENTS, parse_turn
from ctxproxy.wire.gemini.errors import error_json
from ctxproxy.wire.gemini.forward import API_KEY, GENERATE, STREAM, GeminiCall, key_from_query
from ctxproxy.wire.incremental import BODIES
from ctxproxy.wire.keys import GEMINI

__all__ = ["add_gemini_routes"]

GEMINI_ERRORS = error_renderer(error_json)
_MODEL = "{model:[^/:]+}"


def add_gemini_routes(app: web.Application, prefix: str) -> None:
    """Gemini's routes under ``prefix`` (``""`` or ``/t/{tenant}``); before the ``/v1/{tail}`` relay."""
    for version in ("/v1beta", "/v1"):
        for method in (GENERATE, STREAM):
            app.router.add_post(f"{prefix}{version}/models/{_MODEL}:{method}", _generate(method))
        app.router.add_post(f"{prefix}{version}/models/{_MODEL}:{{method:[A-Za-z]+}}", relay)
    app.router.add_route("*", prefix + "/v1beta/{tail:.*}", relay)


def _generate(method: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def generate(request: web.Request) -> web.StreamResponse:
        request[ERROR_RESPONSE] = GEMINI_ERRORS
        check_request_headers(request.headers)
        config = request.app[CONFIG].current
        call = GeminiCall.of(request, _raw_model(request), method)
        credential = API_KEY.client_authorization(call.headers)
        tenant = resolve_tenant(config, request.match_info.get("tenant"), credential, API_KEY)
        note_tenant(request, tenant.name)
        raw = await read_body(request, config.settings.server.max_body_bytes)
        load = request.app[BODIES].loader(tenant.name, request.headers.get(SESSION_HEADER), CONTENTS)
        turn = parse_turn(raw, request.match_info["model"], call.stream, load)
        return await run_turn(request, tenant, GeminiGenerate(call), turn)

    return generate


async def relay(request: web.Request) -> web.StreamResponse:
    """Any other Gemini path, relayed as it is, the key out of its query."""
    query, key = key_from_query(request.rel_url.raw_query_string)
    headers = request.headers.copy()
    if key and not headers.get(API_KEY.name):
        headers[API_KEY.name] = key
    return await relay_as(request, raw_tail(request), GEMINI, (headers, query))


def _raw_model(request: web.Request) -> str:
    """The model as the client encoded it in its path (``match_info`` holds it decoded)."""
    last = request.rel_url.raw_path.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[0]

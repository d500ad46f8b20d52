"""Liveness and readiness."""

from __future__ import annotations

from aiohttp import web

from ctxproxy.errors import error_body
from ctxproxy.services import CONFIG, LOG_FIELDS, STORE
from ctxproxy.store import StoreError


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Ready when the config is loaded and the store takes writes; the upstream is not probed."""
    holder = request.app[CONFIG]
    try:
        await request.app[STORE].check_writable()
    except StoreError as exc:
        request[LOG_FIELDS].update(error_code="store_unavailable", cause="the store does not take writes")
        return web.json_response(
            error_body(f"Store not writable: {exc}", "server_error", None, "store_unavailable"), status=503
        )
    return web.json_response(
        {"status": "ready", "config_generation": holder.generation, "tenants": len(holder.current.tenants)}
    )

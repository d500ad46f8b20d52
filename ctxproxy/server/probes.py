"""Base-URL probes: ``HEAD`` and ``GET`` on ``/`` and ``/t/{tenant}``, with or without a trailing slash.

Clients check their base URL before they use it (Claude Code sends ``HEAD`` to its
``ANTHROPIC_BASE_URL`` before each run). The answer is 200, to ``HEAD`` without a body, to ``GET``
a small JSON saying this is ctxproxy and which base URLs to configure at this prefix, relative to
the server (``/t/acme/v1`` for OpenAI clients, ``/t/acme`` for Anthropic and Gemini ones): ctxproxy cannot
know the scheme and host a client reaches it by through a TLS proxy.

No key is needed and nothing of a tenant is told but whether it exists, which every route under
``/t/{tenant}`` tells alike: an unknown tenant is a 404 ``tenant_not_found`` in the usual error
shape (to ``HEAD`` without its body). The probe names a tenant only as the path did.
"""

from __future__ import annotations

from aiohttp import web

from ctxproxy.errors import TenantNotFound
from ctxproxy.server.middleware import note_tenant
from ctxproxy.services import CONFIG

__all__ = ["add_probe_routes"]

SERVICE = "ctxproxy"


def add_probe_routes(app: web.Application) -> None:
    """``GET`` routes, so aiohttp answers ``HEAD`` on them too (without the body)."""
    for path in ("/", "/t/{tenant}", "/t/{tenant}/"):
        app.router.add_get(path, base_url_probe)


async def base_url_probe(request: web.Request) -> web.Response:
    tenant = request.match_info.get("tenant")
    prefix = ""
    if tenant is not None:
        if tenant not in request.app[CONFIG].current.tenants:
            raise TenantNotFound(f"Unknown tenant {tenant!r} in the path /t/{tenant}.")
        note_tenant(request, tenant)
        prefix = f"/t/{tenant}"
    openai, anthropic = f"{prefix}/v1", prefix or "/"
    return web.json_response(
        {
            "service": SERVICE,
            "message": (
                f"This is {SERVICE}, a context-compacting proxy for LLM APIs. Set an OpenAI client's base URL to "
                f"this server's {openai}, and an Anthropic client's (ANTHROPIC_BASE_URL) and a Gemini client's "
                f"(GOOGLE_GEMINI_BASE_URL) to {anthropic}."
            ),
            "base_urls": {"openai": openai, "anthropic": anthropic, "gemini": anthropic},
        }
    )

"""``/v1/v1/...``: a client whose base URL ends in ``/v1`` and that adds ``/v1`` itself (the
anthropic SDKs and Claude Code, given ``…/v1``). Relayed, it would reach the upstream as
``/v1/v1/messages`` and come back a bare 404; it is answered here instead, in the shape of the
protocol whose path it is, with the base URL to use."""

from __future__ import annotations

from aiohttp import web

from ctxproxy.errors import NotFound
from ctxproxy.server.render import error_renderer
from ctxproxy.services import ERROR_RESPONSE
from ctxproxy.wire.keys import relayed_protocol


async def doubled_v1(request: web.Request) -> web.StreamResponse:
    tail = "/" + request.match_info["tail"]
    request[ERROR_RESPONSE] = error_renderer(relayed_protocol(tail).error_json)
    tenant = request.match_info.get("tenant")
    root = str(request.url.origin()) + (f"/t/{tenant}" if tenant is not None else "")
    raise NotFound(
        f"The path {request.path} has /v1 twice: the client's base URL ends in /v1 and the client adds /v1 itself. "
        f"Drop the /v1 from the base URL: {root} for the anthropic SDKs and Claude Code "
        f"(the openai SDKs take {root}/v1).",
        code="doubled_v1_path",
        cause="base URL ends in /v1 and the client added /v1",
    )

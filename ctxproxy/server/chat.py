"""``POST /v1/chat/completions``: parse the body with the OpenAI chat adapter, run the pipeline."""

from __future__ import annotations

from aiohttp import web

from ctxproxy.errors import BodyTooLarge
from ctxproxy.pipeline.run import run_turn
from ctxproxy.server.body_coding import BodyDecoder, request_coding
from ctxproxy.server.middleware import note_tenant
from ctxproxy.server.request_headers import check_request_headers
from ctxproxy.server.tenancy import resolve_tenant
from ctxproxy.services import CONFIG
from ctxproxy.session.identity import SESSION_HEADER
from ctxproxy.wire.incremental import BODIES
from ctxproxy.wire.openai_chat import OPENAI_CHAT
from ctxproxy.wire.openai_chat.body import parse_body


async def chat_completions(request: web.Request) -> web.StreamResponse:
    check_request_headers(request.headers)
    app = request.app
    config = app[CONFIG].current
    tenant = resolve_tenant(config, request.match_info.get("tenant"), request.headers.get("Authorization"))
    note_tenant(request, tenant.name)
    load = app[BODIES].loader(tenant.name, request.headers.get(SESSION_HEADER))
    turn = parse_body(await read_body(request, config.settings.server.max_body_bytes), load)
    return await run_turn(request, tenant, OPENAI_CHAT, turn)


async def read_body(request: web.Request, limit: int) -> bytes:
    """The whole body, decoded (``ctxproxy.server.body_coding``), refusing early (before reading it)
    when it is declared too large, and as soon as it grows, decoded, past ``limit``."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(f"{declared} bytes", limit)
    coding = request_coding(request.headers)
    decoder = BodyDecoder(coding) if coding is not None else None
    pieces: list[bytes] = []  # joined once at the end: one copy of the body, not two
    size = 0
    content = request.content
    while not content.at_eof():  # a body read whole (the usual) is one read, not one and an empty one
        chunk = await content.readany()
        for piece in decoder.feed(chunk) if decoder is not None else (chunk,):
            pieces.append(piece)
            size += len(piece)
            if size > limit:
                raise _too_large(f"over {limit} bytes" + (f" once decoded from {coding}" if coding else ""), limit)
    if decoder is not None:
        decoder.finish()
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _too_large(size: str, limit: int) -> BodyTooLarge:
    return BodyTooLarge(
        f"The request body ({size}) exceeds the proxy's limit of {limit} bytes (server.max_body_bytes in proxy.toml)."
    )

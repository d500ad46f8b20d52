"""The Responses API's WebSocket transport (``GET /v1/responses`` with ``Upgrade: websocket``), relayed.

Codex's built-in OpenAI provider opens one first (``openai-beta: responses_websockets=…``): it
sends ``response.create`` messages and reads the same events a stream carries. ctxproxy relays the
socket faithfully — nothing in it is compacted (the README says how to get compaction: the HTTP
transport, which Codex falls back to):

1. the upstream socket is opened first, at the tenant's ``base_url`` + ``/responses`` with the
   client's query and headers (hop-by-hop and ``Sec-WebSocket-*`` ones aside: the two handshakes
   are each side's own), the key as on every other path;
2. an upstream that does not upgrade answers the client with its own status and body (so a client
   falls back to HTTP at once); one that cannot be reached is a 502, as on every path;
3. then the client's socket is accepted (the subprotocol the upstream chose, if any) and every
   text, binary and close frame is passed on in both directions until either side closes; a
   close code is passed on too.

The request's log line says ``websocket`` and how many messages went each way; never their content.
"""

from __future__ import annotations

import asyncio
from typing import Final

import aiohttp
import structlog
from aiohttp import WSMsgType, web

from ctxproxy.config.models import TenantConfig
from ctxproxy.services import HTTP, LOG_FIELDS
from ctxproxy.upstream.client import TRANSPORT_ERRORS, translate
from ctxproxy.upstream.headers import upstream_request_headers, upstream_url
from ctxproxy.wire.openai_responses.forward import RESPONSES_PATH

__all__ = ["is_websocket", "relay_websocket"]

log = structlog.get_logger(__name__)

_HANDSHAKE: Final = ("sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions", "sec-websocket-protocol")
_PASSED: Final = frozenset({WSMsgType.TEXT, WSMsgType.BINARY})


def is_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


async def relay_websocket(request: web.Request, tenant: TenantConfig) -> web.StreamResponse:
    url = upstream_url(tenant.upstream, RESPONSES_PATH, request.rel_url.raw_query_string)
    headers = upstream_request_headers(request.headers, tenant.upstream, decode_body=False)
    for name in _HANDSHAKE:
        headers.popall(name, None)
    protocols = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
    fields = request[LOG_FIELDS]
    fields["websocket"] = True
    try:
        upstream = await request.app[HTTP].session.ws_connect(
            url, headers=headers, protocols=protocols, timeout=aiohttp.ClientWSTimeout(ws_receive=None)
        )
    except aiohttp.WSServerHandshakeError as refused:
        fields["upstream_status"] = refused.status
        return web.Response(status=refused.status, text=refused.message or "", content_type="text/plain")
    except TRANSPORT_ERRORS as exc:
        raise translate(exc, tenant.upstream) from None
    fields["upstream_status"] = 101
    async with upstream:
        client = web.WebSocketResponse(protocols=[upstream.protocol] if upstream.protocol else ())
        await client.prepare(request)
        sent, received = await _pump(client, upstream)
    fields.update(ws_sent=sent, ws_received=received)
    return client


async def _pump(client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse) -> tuple[int, int]:
    """Pass frames both ways until one side closes (its close code passed on); how many messages
    went up and down."""
    counts = [0, 0]
    up = asyncio.create_task(_forward(client, upstream, counts, 0), name="ws_client_to_upstream")
    down = asyncio.create_task(_forward(upstream, client, counts, 1), name="ws_upstream_to_client")
    done, pending = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    code = (client.close_code if up in done else upstream.close_code) or aiohttp.WSCloseCode.OK
    await client.close(code=code)
    await upstream.close(code=code)
    return counts[0], counts[1]


async def _forward(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    target: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    counts: list[int],
    slot: int,
) -> None:
    """Every text and binary message of ``source`` to ``target``, until ``source`` closes."""
    async for message in source:
        if message.type not in _PASSED:
            return
        try:
            if message.type == WSMsgType.TEXT:
                await target.send_str(message.data)
            else:
                await target.send_bytes(message.data)
        except (ConnectionError, RuntimeError) as exc:
            log.info("websocket.peer_gone", error=type(exc).__name__)
            return
        counts[slot] += 1

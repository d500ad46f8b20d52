"""Every other ``/v1/*`` path: a streaming reverse proxy.

Method, path, query, headers (hop-by-hop excepted) and body reach the upstream intact, the body
streamed rather than buffered; the answer comes back the same way, still content-encoded. Two
exceptions: a path that could leave ``/v1`` is refused (``upstream_url``), and a content-coded
request body is forwarded decoded, read whole within ``server.max_body_bytes``. The key goes in
the header of the protocol whose path it is (``ctxproxy.wire.keys``: ``x-api-key`` under
``/v1/messages``, else ``Authorization``), which is also where a client's proxy key is read; the
errors ctxproxy answers itself (upstream unreachable 502, timeout 504, body over the limit 413,
unknown tenant 404, ...) are in that protocol's shape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web
from multidict import CIMultiDict

from ctxproxy.server.body_coding import request_coding
from ctxproxy.server.chat import read_body
from ctxproxy.server.middleware import note_tenant
from ctxproxy.server.render import error_renderer
from ctxproxy.server.request_headers import check_request_headers
from ctxproxy.server.tenancy import resolve_tenant
from ctxproxy.services import CONFIG, ERROR_RESPONSE, HTTP, LOG_FIELDS
from ctxproxy.stopwatch import upstream_call
from ctxproxy.upstream.client import request_body_chunks, timeout_for, upstream_errors
from ctxproxy.upstream.forward import Sent
from ctxproxy.upstream.headers import upstream_request_headers, upstream_url
from ctxproxy.upstream.relay import relay_bytes
from ctxproxy.wire.keys import RelayedProtocol, relayed_protocol


async def passthrough(request: web.Request) -> web.StreamResponse:
    tail = raw_tail(request)
    return await relay_as(request, tail, relayed_protocol(tail), (request.headers, request.rel_url.raw_query_string))


async def relay_as(request: web.Request, tail: str, protocol: RelayedProtocol, client: Sent) -> web.StreamResponse:
    """Relay ``request`` to ``tail`` as ``protocol``'s, with ``client``'s headers and query (a
    protocol may move a key out of the query first)."""
    request[ERROR_RESPONSE] = error_renderer(protocol.error_json)
    check_request_headers(request.headers)
    config = request.app[CONFIG].current
    key_header = protocol.key_header
    client_headers, query = client
    credential = key_header.client_authorization(client_headers)
    tenant = resolve_tenant(config, request.match_info.get("tenant"), credential, key_header)
    note_tenant(request, tenant.name)
    url = upstream_url(tenant.upstream, tail, query)
    headers = upstream_request_headers(client_headers, tenant.upstream, decode_body=False, key_header=key_header)
    body = await _body(request, headers, config.settings.server.max_body_bytes)
    with upstream_call() as answered:
        with upstream_errors(tenant.upstream):
            up = await request.app[HTTP].session.request(
                request.method,
                url,
                headers=headers,
                data=body,
                timeout=timeout_for(tenant.upstream),
                auto_decompress=False,
                # The client's own Accept-Encoding (or none) decides what comes back encoded.
                skip_auto_headers=("Accept-Encoding",),
                allow_redirects=False,
            )
        answered()
        request[LOG_FIELDS]["upstream_status"] = up.status
        try:
            return await relay_bytes(request, up, tenant.upstream.read_timeout)
        finally:
            up.close()


async def _body(request: web.Request, headers: CIMultiDict[str], limit: int) -> bytes | AsyncIterator[bytes] | None:
    """What to send upstream; sets its Content-Length when it is known."""
    if not request.body_exists:
        return None
    if request_coding(request.headers) is not None:
        # Decoded by aiohttp: its length is known only once read, and a body over the limit must
        # be refused before the upstream request starts.
        return await read_body(request, limit)
    if request.content_length is not None:
        headers["Content-Length"] = str(request.content_length)
    return request_body_chunks(request.content)


def raw_tail(request: web.Request) -> str:
    """The path after the route's own ``/v1`` as the client encoded it (``match_info`` holds it
    decoded): ``/v1/{tail}`` or ``/t/{tenant}/v1/{tail}``, so 2 or 4 leading raw segments (the
    router matches the tenant within one raw segment, an encoded slash included)."""
    prefix = 4 if "tenant" in request.match_info else 2
    return "/" + "/".join(request.rel_url.raw_path.split("/")[prefix:])

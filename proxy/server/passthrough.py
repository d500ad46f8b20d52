"""Every other ``/v1/*`` path: a streaming reverse proxy.

Method, path, query, headers (hop-by-hop excepted) and body reach the upstream intact, the body
streamed rather than buffered; the answer comes back the same way, still content-encoded.
"""

from __future__ import annotations

from aiohttp import web

from proxy.server.keys import CONFIG, HTTP, LOG_FIELDS
from proxy.server.tenancy import resolve_tenant
from proxy.upstream.client import request_body_chunks, timeout_for, upstream_errors
from proxy.upstream.headers import upstream_request_headers, upstream_url
from proxy.upstream.relay import relay_bytes


async def passthrough(request: web.Request) -> web.StreamResponse:
    config = request.app[CONFIG].current
    tenant = resolve_tenant(config, request.match_info.get("tenant"), request.headers.get("Authorization"))
    request[LOG_FIELDS]["tenant"] = tenant.name
    headers = upstream_request_headers(request.headers, tenant, decode_body=False)
    if request.content_length is not None:
        headers["Content-Length"] = str(request.content_length)
    body = request_body_chunks(request.content) if request.body_exists else None
    url = upstream_url(tenant, "/" + request.match_info["tail"], request.query_string)
    with upstream_errors(tenant.upstream):
        up = await request.app[HTTP].request(
            request.method,
            url,
            headers=headers,
            data=body,
            timeout=timeout_for(tenant.upstream),
            auto_decompress=False,
            allow_redirects=False,
        )
    request[LOG_FIELDS]["upstream_status"] = up.status
    try:
        return await relay_bytes(request, up)
    finally:
        up.close()

"""Every other ``/v1/*`` path: a streaming reverse proxy.

Method, path, query, headers (hop-by-hop excepted) and body reach the upstream intact, the body
streamed rather than buffered; the answer comes back the same way, still content-encoded.
"""

from __future__ import annotations

from aiohttp import web

from proxy.server.keys import CONFIG, HTTP, LOG_FIELDS
from proxy.server.request_headers import check_request_headers
from proxy.server.tenancy import resolve_tenant
from proxy.upstream.client import request_body_chunks, timeout_for, upstream_errors
from proxy.upstream.headers import upstream_request_headers, upstream_url
from proxy.upstream.relay import relay_bytes


async def passthrough(request: web.Request) -> web.StreamResponse:
    check_request_headers(request.headers)
    config = request.app[CONFIG].current
    tenant = resolve_tenant(config, request.match_info.get("tenant"), request.headers.get("Authorization"))
    request[LOG_FIELDS]["tenant"] = tenant.name
    headers = upstream_request_headers(request.headers, tenant, decode_body=False)
    if request.content_length is not None:
        headers["Content-Length"] = str(request.content_length)
    body = request_body_chunks(request.content) if request.body_exists else None
    url = upstream_url(tenant, _raw_tail(request), request.rel_url.raw_query_string)
    with upstream_errors(tenant.upstream):
        up = await request.app[HTTP].request(
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
    request[LOG_FIELDS]["upstream_status"] = up.status
    try:
        return await relay_bytes(request, up)
    finally:
        up.close()


def _raw_tail(request: web.Request) -> str:
    """The path after the route's own ``/v1`` as the client encoded it (``match_info`` holds it
    decoded): ``/v1/{tail}`` or ``/t/{tenant}/v1/{tail}``, so 2 or 4 leading raw segments (the
    router matches the tenant within one raw segment, an encoded slash included)."""
    prefix = 4 if "tenant" in request.match_info else 2
    return "/" + "/".join(request.rel_url.raw_path.split("/")[prefix:])

"""Helper servers for bench/overhead.py, each run in its own process.

    python bench/_servers.py upstream --port P
        A minimal OpenAI-style upstream: POST /v1/chat/completions answers a fixed small
        chat.completion (or, when the body contains ``"stream":true``, 20 SSE chunk events, a
        usage chunk when it asks for one, and ``[DONE]``, written one event per write, with no
        delays); ``usage.prompt_tokens`` is the body's length / 4, so it looks like a real
        count. It reads the whole body and does a few substring searches on it, the same work
        whichever path the request came by. ``--gap MS``: a pause before each stream event, so
        that each one reaches the reader alone, as a model's tokens do.

    python bench/_servers.py forward --port P --upstream http://127.0.0.1:U
        The floor for a Python proxy: read the request body, POST it upstream with one pooled
        ClientSession, stream the answer back chunk by chunk. No parsing, no logging.

Both serve GET /healthz for readiness polling and use aiohttp's default asyncio loop, as
ctxproxy does. Not the test fake from tests/: nothing here is shared with the proxy's tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import aiohttp
from aiohttp import web

# --- the upstream -----------------------------------------------------------------------------

COMPLETION = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Sure, here is a short and fixed answer."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 9, "total_tokens": 109},
    },
    separators=(",", ":"),
).encode()

STREAM_EVENTS = [
    b"data: "
    + json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": None}],
        },
        separators=(",", ":"),
    ).encode()
    + b"\n\n"
    for i in range(20)
] + [b"data: [DONE]\n\n"]

STREAM_MARKER = b'"stream":true'
USAGE_MARKER = b'"include_usage":true'
PROMPT_100 = b'"prompt_tokens":100'


def usage_event(prompt_tokens: int) -> bytes:
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 40, "total_tokens": prompt_tokens + 40}
    chunk = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "choices": [], "usage": usage}
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


async def upstream_chat(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    prompt_tokens = len(body) // 4  # about what a tokenizer makes of it, so usage looks plausible
    if STREAM_MARKER not in body:
        completion = COMPLETION.replace(PROMPT_100, b'"prompt_tokens":%d' % prompt_tokens)
        return web.Response(body=completion, content_type="application/json")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    gap = request.app[GAP]
    for event in STREAM_EVENTS[:-1]:
        if gap:
            await asyncio.sleep(gap)
        await response.write(event)
    if USAGE_MARKER in body:
        await response.write(usage_event(prompt_tokens))
    await response.write(STREAM_EVENTS[-1])
    await response.write_eof()
    return response


GAP = web.AppKey("gap", float)


def upstream_app(gap: float = 0.0) -> web.Application:
    """``gap``: seconds before each stream event."""
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[GAP] = gap
    app.router.add_post("/v1/chat/completions", upstream_chat)
    app.router.add_get("/healthz", healthz)
    return app


# --- the bare forwarder -----------------------------------------------------------------------

SESSION = web.AppKey("session", aiohttp.ClientSession)
UPSTREAM = web.AppKey("upstream", str)
_FORWARD_HEADERS = ("Content-Type", "Authorization")


async def forward(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    headers = {h: request.headers[h] for h in _FORWARD_HEADERS if h in request.headers}
    url = request.app[UPSTREAM] + request.path_qs
    async with request.app[SESSION].post(url, data=body, headers=headers) as up:
        response = web.StreamResponse(status=up.status, headers={"Content-Type": up.headers.get("Content-Type", "")})
        await response.prepare(request)
        async for chunk in up.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response


async def _session(app: web.Application):  # type: ignore[no-untyped-def]
    connector = aiohttp.TCPConnector(limit=1000, limit_per_host=0)
    app[SESSION] = aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None), auto_decompress=False
    )
    yield
    await app[SESSION].close()


def forward_app(upstream: str) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[UPSTREAM] = upstream.rstrip("/")
    app.cleanup_ctx.append(_session)
    app.router.add_get("/healthz", healthz)
    app.router.add_post("/v1/{tail:.*}", forward)
    return app


# --- common -----------------------------------------------------------------------------------


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=("upstream", "forward"))
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", help="base URL of the upstream (forward only)")
    parser.add_argument("--gap", type=float, default=0.0, help="ms before each stream event (upstream only)")
    args = parser.parse_args()
    app = upstream_app(args.gap / 1000) if args.role == "upstream" else forward_app(args.upstream)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()

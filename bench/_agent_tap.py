"""A loopback tap between an agent CLI and ctxproxy: relays each request as it came and each answer
as it streams, and notes what the client saw (status, ``X-Ctx-*`` headers) per request.

Only the transport headers are set anew (``Host``, ``Content-Length``, ``Transfer-Encoding``); a
WebSocket upgrade is relayed as the plain request it is to ctxproxy, so the CLI sees ctxproxy's own
answer to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

_NOT_RELAYED = frozenset({"host", "content-length", "transfer-encoding"})
_NOT_RETURNED = frozenset({"content-length", "transfer-encoding", "connection", "content-encoding"})


@dataclass(frozen=True)
class Seen:
    label: tuple[str, str]
    method: str
    path: str
    status: int
    ctx: dict[str, str]  # the X-Ctx-* headers of the answer, names lowered


@dataclass
class Tap:
    target: str  # ctxproxy's root URL
    label: tuple[str, str] = ("", "")
    seen: list[Seen] = field(default_factory=list)

    def make_app(self, http: aiohttp.ClientSession) -> web.Application:
        async def relay(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _NOT_RELAYED]
            async with http.request(
                request.method, self.target + request.path_qs, headers=headers, data=body or None,
                allow_redirects=False, auto_decompress=False,
            ) as upstream:  # fmt: skip
                ctx = {k.lower(): v for k, v in upstream.headers.items() if k.lower().startswith("x-ctx-")}
                self.seen.append(Seen(self.label, request.method, request.path_qs, upstream.status, ctx))
                answer = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                for name, value in upstream.headers.items():
                    if name.lower() not in _NOT_RETURNED:
                        answer.headers.add(name, value)
                if "content-encoding" in upstream.headers:
                    answer.headers["Content-Encoding"] = upstream.headers["content-encoding"]
                await answer.prepare(request)
                try:
                    async for chunk in upstream.content.iter_any():
                        await answer.write(chunk)
                    await answer.write_eof()
                except ConnectionError:  # the CLI hung up once it had what it needed
                    pass
                return answer

        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", relay)
        return app

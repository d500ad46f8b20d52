"""CORS for browser clients: off unless ``[server] cors_origins`` lists origins (or ``"*"``).

ctxproxy decides CORS itself, on every path, relayed ones included (an upstream's own
``Access-Control-*`` headers are dropped on the way back: ``ctxproxy.upstream.headers``):

- A preflight (``OPTIONS`` with ``Origin`` and ``Access-Control-Request-Method``) is answered
  here and never relayed: for a listed origin, 204 with the allowed methods, the headers asked
  for (a listed origin may send any header; the ones clients send are always named) and how long
  a browser may cache the answer; for any other origin, a 403 in OpenAI's error shape with no
  CORS headers, so the browser refuses the request it was about to send.
- Every other answer to a listed origin, JSON or stream, carries ``Access-Control-Allow-Origin``
  and ``Access-Control-Expose-Headers`` naming the ``X-Ctx-*`` headers it has (and the upstream's
  request id, retry and rate-limit headers), so a page can read what ctxproxy did.

``[server]`` is read when the app is made; a change needs a restart like the rest of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from aiohttp import web

from ctxproxy.errors import Forbidden

ALLOW_METHODS = "GET, POST, DELETE, OPTIONS"
# Named in every preflight answer: what the openai and anthropic SDKs and ctxproxy's own
# request headers need (``Authorization`` is never covered by a wildcard, so it is always named).
CLIENT_HEADERS = (
    "Authorization",
    "Content-Type",
    "X-Api-Key",
    "Anthropic-Version",
    "Anthropic-Beta",
    "X-Ctx-User",
    "X-Ctx-Scope",
    "X-Request-Id",
)
MAX_AGE = "600"  # seconds a browser may reuse a preflight answer
_EXPOSED_NAMES = frozenset({"x-request-id", "request-id", "retry-after", "openai-processing-ms"})
_EXPOSED_PREFIXES = ("x-ctx-", "x-ratelimit-", "anthropic-ratelimit-")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")  # an HTTP header name (RFC 9110 token)
_MAX_ASKED = 50


@dataclass(frozen=True)
class CorsPolicy:
    origins: frozenset[str]

    def allowed(self, origin: str | None) -> str | None:
        """The ``Access-Control-Allow-Origin`` value for a request from ``origin``, or None."""
        if not origin or not self.origins:
            return None
        if "*" in self.origins:
            return "*"
        return origin if origin in self.origins else None


CORS_POLICY = web.AppKey("cors_policy", CorsPolicy)


def add_cors(app: web.Application, origins: Iterable[str]) -> None:
    """Answer preflights and mark answers for ``origins`` (``[server] cors_origins``): the request
    middleware asks ``preflight`` and, as each answer is prepared, ``mark_answer`` (one layer
    and one callback for the request, not three)."""
    app[CORS_POLICY] = CorsPolicy(frozenset(origins))


def preflight(request: web.Request, policy: CorsPolicy) -> web.Response | None:
    """The answer to a preflight (None for any other request); a 403 (raised) for an origin not allowed."""
    if request.method != "OPTIONS" or "Access-Control-Request-Method" not in request.headers:
        return None
    origin = request.headers.get("Origin")
    if policy.allowed(origin) is None:
        raise Forbidden(
            _refusal(origin, policy), code="cors_origin_not_allowed", cause="preflight from an origin not allowed"
        )
    asked = request.headers.get("Access-Control-Request-Headers")
    headers = {
        "Access-Control-Allow-Methods": ALLOW_METHODS,
        "Access-Control-Allow-Headers": ", ".join(_allowed_headers(asked)),
        "Access-Control-Max-Age": MAX_AGE,
    }
    return web.Response(status=204, headers=headers)


def mark_answer(request: web.Request, response: web.StreamResponse, policy: CorsPolicy) -> None:
    """As an answer is prepared: every answer to a listed origin, streamed ones included."""
    if not policy.origins:
        return  # no origin is listed: nothing to vary on, nothing to allow
    allowed = policy.allowed(request.headers.get("Origin"))
    if "*" not in policy.origins:
        vary = response.headers.get("Vary")
        if vary is None or "origin" not in vary.lower():
            response.headers["Vary"] = f"{vary}, Origin" if vary else "Origin"
    if allowed is None:
        return
    response.headers["Access-Control-Allow-Origin"] = allowed
    exposed = list(dict.fromkeys(name for name in response.headers if _exposed(name.lower())))
    if exposed:
        response.headers["Access-Control-Expose-Headers"] = ", ".join(exposed)


def _allowed_headers(asked: str | None) -> list[str]:
    """Every header the client means to send (valid names only) and the ones clients always do."""
    names = list(CLIENT_HEADERS)
    known = {name.lower() for name in names}
    for name in (part.strip() for part in (asked or "").split(",")[:_MAX_ASKED]):
        if _TOKEN.match(name) and name.lower() not in known:
            known.add(name.lower())
            names.append(name)
    return names


def _exposed(name: str) -> bool:
    return name in _EXPOSED_NAMES or name.startswith(_EXPOSED_PREFIXES)


def _refusal(origin: str | None, policy: CorsPolicy) -> str:
    shown = repr(origin) if origin and len(origin) <= 100 else "this origin"
    if not policy.origins:
        return (
            f"Cross-origin requests are not allowed from {shown}: this proxy allows no browser origins "
            "([server] cors_origins in proxy.toml is empty)."
        )
    return f"Cross-origin requests are not allowed from {shown}: it is not in [server] cors_origins (proxy.toml)."

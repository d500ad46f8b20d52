"""Which headers cross the proxy, in each direction, and where a request goes upstream.

Hop-by-hop headers (RFC 9110 §7.6.1, plus any named in ``Connection``) never cross. Our own
``X-Ctx-*`` request headers stop here, and so do an upstream's ``Access-Control-*`` answers:
ctxproxy decides CORS itself (``ctxproxy.server.cors``), so a page the operator did not allow
never reads what the proxy fetched with its key. The header that carries a key (``KeyHeader``: for OpenAI
``Authorization: Bearer …``) is replaced by the tenant's upstream key when it has one, otherwise
the client's own header passes through.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import unquote

from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from ctxproxy.config.models import UpstreamConfig
from ctxproxy.errors import BadRequest

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# Set again by whoever writes the next hop. Request bodies are forwarded decoded (aiohttp's server
# decodes them; ctxproxy.server.body_coding refuses what it cannot), so their coding stops here.
_REQUEST_DROP = HOP_BY_HOP | {"host", "content-length", "content-encoding"}
_RESPONSE_DROP = HOP_BY_HOP | {"content-length", "server", "date"}
CTX_PREFIX = "x-ctx-"
CORS_PREFIX = "access-control-"  # ctxproxy answers CORS itself (server/cors.py): an upstream's never crosses


@dataclass(frozen=True)
class KeyHeader:
    """How a protocol sends the upstream key: the header and what precedes the key in it. This is
    where a protocol's header rules differ (a protocol whose key goes in ``x-api-key`` has its own)."""

    name: str
    prefix: str = ""
    replaces: tuple[str, ...] = ()  # other headers a client may send its key in, dropped for the tenant's

    def value(self, key: str) -> str:
        return self.prefix + key

    def client_authorization(self, client: Mapping[str, str]) -> str | None:
        """The key a client sent, as an ``Authorization`` value (what selects its tenant): that
        header when sent, else the key in this header as a bearer token."""
        given = client.get("Authorization")
        if given:
            return given
        key = client.get(self.name, "").removeprefix(self.prefix).strip()
        return f"Bearer {key}" if key else None


BEARER = KeyHeader("Authorization", "Bearer ")  # OpenAI's, and every OpenAI-compatible upstream's


def _connection_tokens(value: str) -> set[str]:
    return {token.strip().lower() for token in value.split(",") if token.strip()}


def _filter(headers: CIMultiDictProxy[str] | CIMultiDict[str], drop: frozenset[str], prefix: str) -> CIMultiDict[str]:
    """``headers`` without those named in ``drop`` or in their ``Connection``, or starting with ``prefix``."""
    connection = headers.get("Connection")
    dropped = drop | _connection_tokens(connection) if connection else drop
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        lower = name.lower()
        if lower not in dropped and not lower.startswith(prefix):
            out.add(name, value)
    return out


def upstream_request_headers(
    client: CIMultiDictProxy[str] | CIMultiDict[str],
    upstream: UpstreamConfig,
    *,
    decode_body: bool,
    key_header: KeyHeader = BEARER,
) -> CIMultiDict[str]:
    """Headers for the upstream request.

    ``decode_body``: the proxy reads the answer (chat completions), so aiohttp negotiates and
    decodes the content encoding itself; otherwise the client's Accept-Encoding passes through
    and the body is relayed still encoded.
    """
    out = _filter(client, _REQUEST_DROP, CTX_PREFIX)
    if decode_body:
        out.popall("Accept-Encoding", None)
    key = upstream.api_key
    if key is not None:
        for name in key_header.replaces:
            out.popall(name, None)
        out[key_header.name] = key_header.value(key.get_secret_value())
    for name, value in upstream.headers.items():
        out[name] = value
    return out


def client_response_headers(upstream: CIMultiDictProxy[str], *, body_decoded: bool) -> CIMultiDict[str]:
    out = _filter(upstream, _RESPONSE_DROP, CORS_PREFIX)
    if body_decoded:
        out.popall("Content-Encoding", None)
    return out


def upstream_url(upstream: UpstreamConfig, tail: str, raw_query: str) -> URL:
    """``tail`` is the path after ``/v1`` (``/chat/completions``); base_url already ends in /v1.

    ``raw_query`` is the query exactly as the client encoded it: decoding and re-encoding it
    would turn an escaped ``%26`` into ``%2526``.
    """
    _checked(tail)
    query = f"?{raw_query}" if raw_query else ""
    return URL(upstream.base_url + tail + query, encoded=True)


class Origin(NamedTuple):
    """Where a connection goes, and what the request's ``Host`` header says of it."""

    scheme: str
    host: str  # as connected to (IDNA-encoded; an IPv6 address without brackets)
    port: int
    host_header: str  # the port only when it is not the scheme's default, as aiohttp's client sent it
    base_path: str  # the base URL's path, without a trailing slash


def upstream_target(upstream: UpstreamConfig, tail: str, raw_query: str) -> tuple[Origin, str]:
    """The origin and request target of ``upstream_url`` (the same URL, without building it)."""
    _checked(tail)
    origin = base_origin(upstream.base_url)
    target = origin.base_path + tail
    if raw_query:
        target = f"{target}?{raw_query}"
    return origin, target or "/"


@lru_cache(maxsize=256)
def base_origin(base_url: str) -> Origin:
    url = URL(base_url)
    host = url.raw_host or ""
    return Origin(url.scheme, host, url.port or 0, url.host_port_subcomponent or host, url.raw_path.rstrip("/"))


@lru_cache(maxsize=256)
def _checked(tail: str) -> None:
    """``check_relayed_path``, done once for each path that passes (a refusal is not cached)."""
    check_relayed_path(tail)


def check_relayed_path(tail: str) -> None:
    """Refuse a path that could leave the upstream's ``/v1`` once some hop decodes or normalises it.

    The tail is relayed as the client encoded it, so every spelling counts: each segment is
    percent-decoded again and again (``%252e`` → ``%2e`` → ``.``) until nothing changes, and no
    form of it may be a dot segment (``.``, ``..``, also with a ``;`` parameter) or hold a slash
    or backslash (an encoded separator: ``%2F``, ``%5C``, ``\\``).
    """
    for segment in tail.split("/"):
        for form in _decodings(segment):
            if "/" in form or "\\" in form:
                raise BadRequest(
                    f"The path segment {_shown(segment)} holds an encoded slash or a backslash; ctxproxy relays "
                    "only plain /v1/... paths: send '/' unencoded and no backslashes.",
                    code="invalid_path",
                )
            if form.split(";", 1)[0] in (".", ".."):
                raise BadRequest(
                    f"The path segment {_shown(segment)} is a dot segment; paths with '.' and '..' segments "
                    "(in any encoding) are refused so that no request leaves /v1: send the resolved path.",
                    code="invalid_path",
                )


def _decodings(segment: str) -> Iterator[str]:
    """``segment``, then each further percent-decoding of it while that changes it (each one
    shortens it, so this ends)."""
    form = segment
    while True:
        yield form
        decoded = unquote(form, errors="surrogateescape")
        if decoded == form:
            return
        form = decoded


def _shown(segment: str) -> str:
    return repr(segment if len(segment) <= 40 else segment[:40] + "…")

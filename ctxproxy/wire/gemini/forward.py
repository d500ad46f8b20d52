"""Posting a Gemini body upstream and relaying the answer, or reporting an overflow.

Where: the tenant's ``base_url`` ends in the API version (``…/v1beta``), like every upstream's
ends in ``/v1``; the path is ``/models/{model}:generateContent`` or
``:streamGenerateContent``, the model as the client wrote it in its path, its query as it came but
for ``key``.

The key: a client sends its own in ``x-goog-api-key`` (the SDK) or as ``?key=`` (curl, REST
samples). ``GeminiCall.of`` takes a ``key`` out of the query wherever it is; the tenant's key, when
it has one, goes upstream as ``x-goog-api-key`` and replaces the client's (and any
``Authorization``); without one, the client's key passes as ``x-goog-api-key`` — never in a URL.

The sequence is ``ctxproxy.upstream.forward``'s with Gemini's stream (``stream``). The prompt's
size is ``usageMetadata.promptTokenCount`` (the cached part included), a sample of how the model
counts unless the request names a ``cachedContent``: then part of the prompt is that server-side
cache, which ctxproxy never saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

from aiohttp import web
from multidict import CIMultiDict

from ctxproxy.config.models import TenantConfig
from ctxproxy.pipeline.wire import Relayed
from ctxproxy.services import LOG_FIELDS
from ctxproxy.tools.calls import json_object
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.forward import Forwarding, forward
from ctxproxy.upstream.headers import KeyHeader
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.upstream.port import UpstreamPort
from ctxproxy.upstream.relay import AnswerUsage
from ctxproxy.upstream.sse import EventFramer
from ctxproxy.upstream.usage import plausible_tokens
from ctxproxy.wire.gemini.stream import GEMINI_EVENTS, GeminiEnd, Usage, usage_of

__all__ = ["API_KEY", "GENERATE", "STREAM", "GeminiCall", "forward_gemini", "key_from_query"]

API_KEY = KeyHeader("x-goog-api-key", replaces=("Authorization",))
GENERATE: Final = "generateContent"
STREAM: Final = "streamGenerateContent"
_KEY_PARAM: Final = "key"


@dataclass(frozen=True)
class GeminiCall:
    """What a client's path and query say: the model, the method, and its headers and query as
    they go upstream (its key moved from the query to ``x-goog-api-key``)."""

    model: str  # as the client encoded it in the path
    method: str  # generateContent | streamGenerateContent
    headers: CIMultiDict[str]
    query: str

    @property
    def stream(self) -> bool:
        return self.method == STREAM

    @property
    def path(self) -> str:
        return f"/models/{self.model}:{self.method}"

    @staticmethod
    def of(request: web.Request, model: str, method: str) -> GeminiCall:
        query, key = key_from_query(request.rel_url.raw_query_string)
        headers = CIMultiDict(request.headers)
        if key and not headers.get(API_KEY.name):
            headers[API_KEY.name] = key
        return GeminiCall(model, method, headers, query)


def key_from_query(raw_query: str) -> tuple[str, str | None]:
    """``raw_query`` without its ``key`` parameters (the rest as encoded), and the first key's value."""
    kept, key = [], None
    for param in raw_query.split("&") if raw_query else ():
        name, _, value = param.partition("=")
        if unquote(name) == _KEY_PARAM:
            key = key if key is not None else unquote(value.replace("+", " "))
        else:
            kept.append(param)
    return "&".join(kept), key


async def forward_gemini(
    request: web.Request,
    http: UpstreamHttp,
    tenant: TenantConfig,
    call: GeminiCall,
    body: bytes,
    ctx_headers: Mapping[str, str],
) -> Relayed | Overflow:
    end = GeminiEnd()
    usage = AnswerUsage(_json_usage, lambda: end.usage)
    how = Forwarding(call.path, GEMINI_EVENTS, EventFramer(), end, usage)
    port = UpstreamPort(http, tenant.upstream, key_header=API_KEY)
    sent = (call.headers, call.query)
    answer = await forward(request, port, body, call.stream, ctx_headers, how, request[LOG_FIELDS], client=sent)
    return answer if isinstance(answer, Overflow) else relayed(answer, usage.usage)


def _json_usage(answer: bytes) -> Usage:
    """A JSON answer's usage, an empty one when it has none."""
    return usage_of(json_object(answer)) or Usage()


def relayed(response: web.StreamResponse, usage: Usage) -> Relayed:
    if not plausible_tokens(usage.prompt_tokens):
        return Relayed(response)
    return Relayed(response, usage.prompt_tokens, cached_tokens=usage.cached_tokens)

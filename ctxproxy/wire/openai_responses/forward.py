"""Posting a Responses body upstream and relaying the answer, or reporting an overflow.

The sequence is ``ctxproxy.upstream.forward``'s; the Responses API brings its path
(:data:`RESPONSES_PATH`, after the upstream's ``/v1``), its key header (``Authorization: Bearer``,
as every OpenAI API), its stream's events (``stream.RESPONSES_EVENTS``: an overflow ``error`` or
``response.failed`` event before the first output is compacted and retried; one after output is
relayed), its framing and ending (``stream``), and the reading of its usage.

The prompt's size is what the answer's ``usage.input_tokens`` says (a JSON answer's, or the
terminal event's): on OpenAI it includes the cached tokens, so every answer that reports it is a
sample of how the upstream counts the whole prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import orjson
from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.pipeline.wire import Relayed
from ctxproxy.services import LOG_FIELDS
from ctxproxy.upstream.client import UpstreamHttp
from ctxproxy.upstream.forward import Forwarding, forward
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.upstream.port import UpstreamPort
from ctxproxy.upstream.usage import plausible_tokens
from ctxproxy.wire.openai_responses.stream import (
    RESPONSES_EVENTS,
    ResponsesEnd,
    ResponsesFramer,
    cached_tokens,
    input_tokens,
)

__all__ = ["COMPACT_PATH", "RESPONSES_PATH", "AnswerUsage", "forward_responses", "relayed"]

RESPONSES_PATH: Final = "/responses"
COMPACT_PATH: Final = "/responses/compact"


async def forward_responses(
    request: web.Request,
    http: UpstreamHttp,
    tenant: TenantConfig,
    body: bytes,
    stream: bool,
    ctx_headers: Mapping[str, str],
    path: str = RESPONSES_PATH,
) -> Relayed | Overflow:
    """``path``: after the upstream's ``/v1`` (``/responses/compact`` for a compaction that goes
    upstream as sent)."""
    end = ResponsesEnd()
    usage = AnswerUsage(end)
    how = Forwarding(path, RESPONSES_EVENTS, ResponsesFramer(), end, usage)
    port = UpstreamPort(http, tenant.upstream)
    answer = await forward(request, port, body, stream, ctx_headers, how, request[LOG_FIELDS])
    return answer if isinstance(answer, Overflow) else relayed(answer, usage.prompt_tokens, usage.cached_tokens)


class AnswerUsage:
    """The prompt's size an answer reports: a JSON answer's, else its terminal event's (read by
    ``ResponsesEnd`` as the events are relayed). Takes no event out (``upstream.relay.Tap``)."""

    def __init__(self, end: ResponsesEnd) -> None:
        self._end = end
        self._json: int | None = None
        self._json_cached: int | None = None

    def events(self, ready: bytes) -> bytes:
        return ready

    def see_json(self, body: bytes) -> None:
        try:
            answer = orjson.loads(body)
        except orjson.JSONDecodeError:
            self._json = self._json_cached = None
            return
        self._json, self._json_cached = input_tokens(answer), cached_tokens(answer)

    @property
    def prompt_tokens(self) -> int | None:
        return self._json if self._json is not None else self._end.prompt_tokens

    @property
    def cached_tokens(self) -> int | None:
        return self._json_cached if self._json is not None else self._end.cached_tokens


def relayed(response: web.StreamResponse, prompt: int | None, cached: int | None = None) -> Relayed:
    """The answer, with its prompt's size when the upstream counted it (a server that does not
    count reports 0) and how much of it the provider's cache served."""
    return Relayed(response, prompt, cached_tokens=cached) if plausible_tokens(prompt) else Relayed(response)

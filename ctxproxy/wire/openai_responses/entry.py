"""A Responses API request's way through ctxproxy, from its body to its answer.

``answer_responses`` (``POST /v1/responses``): ctxproxy's own compaction items in ``input`` are
expanded (``expand``); a request ending with ``compaction_trigger`` is answered by ctxproxy when it
serves remote compaction (``compaction_serve``); every other one is parsed (``body``) and run
through the pipeline (``ctxproxy.pipeline.run``), which compacts, forwards and relays it.

``answer_compact`` (``POST /v1/responses/compact``, when ctxproxy serves it): the same expansion,
then ctxproxy's compaction; a body it cannot model goes to the upstream's ``/responses/compact``
as sent, saying why (``X-Ctx-Forwarded-As-Sent``).
"""

from __future__ import annotations

import orjson
from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.errors import ContextLengthExceeded
from ctxproxy.pipeline.as_sent import AS_SENT_HEADER
from ctxproxy.pipeline.run import run_turn
from ctxproxy.services import HTTP, LOG_FIELDS
from ctxproxy.session.identity import SESSION_HEADER
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.wire.incremental import BODIES, BodyLoader
from ctxproxy.wire.openai_responses import OPENAI_RESPONSES
from ctxproxy.wire.openai_responses.body import load_body, parse_turn
from ctxproxy.wire.openai_responses.compaction_serve import serve_compact, serve_trigger, served_summaries
from ctxproxy.wire.openai_responses.expand import expand_compactions
from ctxproxy.wire.openai_responses.forward import COMPACT_PATH, forward_responses

__all__ = ["answer_compact", "answer_responses"]


async def answer_responses(request: web.Request, tenant: TenantConfig, raw: bytes) -> web.StreamResponse:
    load = _loader(request, tenant)
    body, raw = await _expanded(request, tenant, raw, load)
    served = await serve_trigger(request, tenant, body)
    if served is not None:
        return served
    return await run_turn(request, tenant, OPENAI_RESPONSES, parse_turn(raw, body, load))


async def answer_compact(request: web.Request, tenant: TenantConfig, raw: bytes) -> web.StreamResponse:
    body, raw = await _expanded(request, tenant, raw, _loader(request, tenant))
    served = await serve_compact(request, tenant, raw)
    if isinstance(served, web.StreamResponse):
        return served
    where = served.as_sent.param if served.as_sent is not None else None
    request[LOG_FIELDS].update(model=served.model, forwarded_as_sent=where or "input")
    headers = {AS_SENT_HEADER: where or "input"}
    answer = await forward_responses(request, request.app[HTTP], tenant, raw, False, headers, path=COMPACT_PATH)
    if isinstance(answer, Overflow):
        raise ContextLengthExceeded(
            "The upstream refused to compact the conversation as too long for the model's context window.",
            cause="the upstream refused a compaction as too long",
        )
    return answer.response


def _loader(request: web.Request, tenant: TenantConfig) -> BodyLoader:
    return request.app[BODIES].loader(tenant.name, request.headers.get(SESSION_HEADER), "input")


async def _expanded(
    request: web.Request, tenant: TenantConfig, raw: bytes, load: BodyLoader
) -> tuple[dict[str, object], bytes]:
    body = load_body(raw, load)
    expanded = await expand_compactions(served_summaries(request), tenant.name, body)
    if expanded is None:
        return body, raw
    body, count, gone = expanded
    request[LOG_FIELDS].update(compactions_expanded=count, compactions_gone=gone)
    return body, orjson.dumps(body)

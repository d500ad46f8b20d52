"""The Responses API's remote compaction, served by ctxproxy for any upstream.

Codex asks its server to compact a conversation that fills its window: with
``remote_compaction_v2``, an ordinary ``POST /v1/responses`` whose last input item is
``{"type": "compaction_trigger"}``, expecting exactly one ``compaction`` output item; others call
``POST /v1/responses/compact``. The client then sends that item back, in place of what it stands
for. Only OpenAI's servers know how: any other upstream refuses the trigger. ctxproxy answers both
itself, unless the tenant relays them (:func:`serves_compaction`):

1. the conversation before the trigger is parsed like any Responses request (what ctxproxy cannot
   model, or a history kept on the server, is not served: it goes upstream as sent);
2. it is identified as the pipeline identifies it (its session);
3. the tenant's summariser (``Compactor.summarizer``: its LLM in this protocol, with the extractive
   fallback, a plugin's, or the extractive one) summarises every message but the system and
   developer ones, which the client keeps and sends again;
4. the summary is stored under the session (``compaction_store``), and the client gets a
   ``compaction`` item referring to it (``compaction_answer``), with ``X-Ctx-Session`` and
   ``X-Ctx-Remote-Compaction: served``.

When the item comes back, ``expand`` puts the summary in its place, so the model behind ctxproxy
reads the compacted conversation whichever provider it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson
from aiohttp import web
from yarl import URL

from ctxproxy.compaction.inputs import CompactionInput
from ctxproxy.compaction.windows import context_window
from ctxproxy.config.models import TenantConfig, UpstreamConfig
from ctxproxy.errors import ProxyError
from ctxproxy.pipeline.identify import identify
from ctxproxy.pipeline.run import USER_HEADER
from ctxproxy.pipeline.turn import Turn
from ctxproxy.services import COMPACTOR, CONFIG, KNOWN, LOG_FIELDS, STORE, TOKENS
from ctxproxy.session.fork import owner_of
from ctxproxy.session.identity import SESSION_HEADER
from ctxproxy.strategies.base import Window
from ctxproxy.summarize.base import SummaryTask
from ctxproxy.vocabulary import SYSTEM_ROLES, prompt_tokens
from ctxproxy.wire.openai_responses.adapter import OpenAIResponses
from ctxproxy.wire.openai_responses.body import parse_turn
from ctxproxy.wire.openai_responses.compaction_answer import (
    ServedCompaction,
    compacted_response,
    response_events,
    response_object,
)
from ctxproxy.wire.openai_responses.compaction_store import CompactionRef, ServedSummaries
from ctxproxy.wire.openai_responses.completion import RESPONSES_COMPLETION
from ctxproxy.wire.openai_responses.items import COMPACTION_TRIGGER

__all__ = ["SERVED_HEADER", "served_summaries", "serve_compact", "serve_trigger", "serves_compaction"]

SERVED_HEADER: Final = "X-Ctx-Remote-Compaction"
OPENAI_HOST: Final = "api.openai.com"


def serves_compaction(upstream: UpstreamConfig) -> bool:
    """Whether ctxproxy answers remote compactions for this upstream: ``[upstream]
    responses_compaction``, whose ``auto`` relays them to OpenAI's API (which serves them with its
    own models) and serves them for every other upstream."""
    if upstream.responses_compaction == "auto":
        return URL(upstream.base_url).host != OPENAI_HOST
    return upstream.responses_compaction == "serve"


def served_summaries(request: web.Request) -> ServedSummaries:
    ttl = request.app[CONFIG].current.settings.store.session_ttl_days * 86400
    return ServedSummaries(request.app[STORE], ttl)


def ends_with_trigger(body: Mapping[str, Any]) -> bool:
    items = body.get("input")
    return (
        isinstance(items, list)
        and bool(items)
        and isinstance(items[-1], dict)
        and (items[-1].get("type") == COMPACTION_TRIGGER)
    )


async def serve_trigger(request: web.Request, tenant: TenantConfig, body: dict[str, Any]) -> web.StreamResponse | None:
    """The answer to a request ending with ``compaction_trigger``; None when ctxproxy does not serve
    it (another request, a tenant that relays, a conversation ctxproxy cannot model)."""
    if not ends_with_trigger(body) or not serves_compaction(tenant.upstream):
        return None
    before = {**body, "input": body["input"][:-1]}
    turn = parse_turn(orjson.dumps(before), before)
    if turn.as_sent is not None or not turn.messages:
        return None
    served, headers = await _compact(request, tenant, turn)
    if not turn.stream:
        return web.json_response(response_object(body, served), headers=headers)
    response = web.StreamResponse(status=200, headers={**headers, "Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(response_events(body, served))
    await response.write_eof()
    return response


async def serve_compact(request: web.Request, tenant: TenantConfig, raw: bytes) -> web.StreamResponse | Turn:
    """The answer to ``POST /v1/responses/compact``; the parsed turn when ctxproxy cannot serve it
    (it goes upstream as sent)."""
    turn = parse_turn(raw)
    if turn.as_sent is not None or not turn.messages:
        return turn
    served, headers = await _compact(request, tenant, turn)
    source = turn.body.get("input")
    items = source if isinstance(source, list) else [{"type": "message", "role": "user", "content": source}]
    return web.json_response(compacted_response(items, served), headers=headers)


async def _compact(request: web.Request, tenant: TenantConfig, turn: Turn) -> tuple[ServedCompaction, dict[str, str]]:
    app = request.app
    counter = app[TOKENS]
    user = turn.user or request.headers.get(USER_HEADER) or None
    session = request.headers.get(SESSION_HEADER)
    found = identify(OpenAIResponses(), turn, tenant.name, session, counter, app[KNOWN], owner_of(user, None))
    req = CompactionInput(
        tenant=tenant,
        key=found.key,
        messages=turn.messages,
        chain=found.chain,
        tokens=found.tokens,
        model=turn.model,
        window=Window(context_window(turn.model, tenant)),
        completion=RESPONSES_COMPLETION,
        headers=request.headers,
        user=user,
    )
    said = [m for m in turn.messages if m.get("role") not in SYSTEM_ROLES]
    budget = tenant.compaction.summary_budget(req.window.budget)
    task = SummaryTask("fresh", said, max_tokens=budget, context=turn.messages)
    result = await app[COMPACTOR].summarizer(req).summarize(task)
    ref = CompactionRef.new(found.key)
    if not await served_summaries(request).save(ref, result.text):
        raise ProxyError(
            "ctxproxy could not store the summary of this compaction (its store is unavailable); "
            "the conversation was not compacted. Try again.",
            code="store_unavailable",
            cause="the store refused a compaction summary",
        )
    before = prompt_tokens(found.tokens)
    request[LOG_FIELDS].update(
        session=found.key.value, model=turn.model, stream=turn.stream, tokens_before=before,
        remote_compaction="served", summarizer=result.summarizer,
    )  # fmt: skip
    served = ServedCompaction(ref.ident, ref.content, before, counter.count_text(result.text, turn.model))
    return served, {"X-Ctx-Session": found.key.value, SERVED_HEADER: "served"}

"""The tool-output step: fresh tool results compressed, old ones masked, originals kept
(``ctxproxy.tool_outputs`` plans it, purely; this module does the I/O).

``prepare`` reads the session's record (``store.keys.tool_outputs_key``: which results went
upstream compressed, as which text), plans, and remembers what the plan compressed for the
first time and the originals of what it changed (``tool_output_original_key``, kept as long as
the session, ``session_ttl_days``) — before the request is forwarded, so a later request sends
the same bytes. ``apply`` rewrites, by identity, the client's tool messages in what ``augment``
forwards: a message the compaction left out is not there to rewrite, and ctxproxy's own
messages are never touched. ``SessionOriginals`` answers ``ctxproxy_retrieve``: from the
request's own messages first (a client resends its whole conversation), then from the store.

A failing store costs byte-stability, never the request: without the record, results compressed
earlier go as the client sent them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import structlog
from aiohttp import web

from ctxproxy.compaction.windows import context_window
from ctxproxy.config.models import TenantConfig
from ctxproxy.pipeline.turn import Augmented, ToolOutputCounts, Turn
from ctxproxy.pipeline.wire import WireAdapter
from ctxproxy.services import CONFIG, STORE, TOKENS
from ctxproxy.session import SessionKey, message_digest
from ctxproxy.store import Store, StoreError, warn_store_failure
from ctxproxy.store.keys import tool_output_original_key, tool_outputs_key
from ctxproxy.tokens import TokenCounter
from ctxproxy.tool_outputs import ref_of
from ctxproxy.tool_outputs.plan import Options, ToolOutputPlan, plan, result_text
from ctxproxy.tools.definitions import RETRIEVE
from ctxproxy.tools.retrieve import Retrieval
from ctxproxy.vocabulary import ROLE_ASSISTANT, ROLE_TOOL

log = structlog.get_logger(__name__)

SENT = "sent"  # the record's results sent compressed: key → text
KEPT = "kept"  # the record's refs whose originals are stored
KEEP_SHARE: Final = 0.5  # the results kept whole between two masking steps take at most this share of the budget
CHARS_PER_TOKEN: Final = 4  # a result's tokens, estimated from its characters


@dataclass(frozen=True)
class Prepared:
    plan: ToolOutputPlan  # empty when nothing changes: ``ctxproxy_retrieve`` is still answered
    retrieval: Retrieval


class SessionOriginals:
    """A tool output's original by its ref: from the request's messages, else the session's store."""

    def __init__(self, store: Store, key: SessionKey, messages: Sequence[Mapping[str, Any]]) -> None:
        self._store, self._key, self._messages = store, key, messages

    async def __call__(self, ref: str) -> str | None:
        for message in self._messages:
            if message.get("role") == ROLE_TOOL:
                text = result_text(message)
                if text is not None and ref_of(text) == ref:
                    return text
        stored = await self._store.get(tool_output_original_key(self._key, ref))
        text = stored.get("text") if isinstance(stored, dict) else None
        return text if isinstance(text, str) else None


async def prepare(
    request: web.Request, tenant: TenantConfig, wire: WireAdapter, turn: Turn, key: SessionKey, results: bool
) -> Prepared | None:
    """The plan for this request's tool results, remembered; None when tool outputs are off or
    the request declines ctxproxy's tools (what it cannot retrieve is not taken away).
    ``results``: whether the conversation holds any (``Identified.tool_at``, kept with the known
    conversation, so no request scans its history for them)."""
    options = tenant.compaction.tool_outputs
    if not (options.enabled and tenant.tools.enabled):
        return None
    offered = wire.offer_tools(turn, [RETRIEVE])
    if offered is None:
        return None
    store, counter = request.app[STORE], request.app[TOKENS]
    retrieval = Retrieval(SessionOriginals(store, key, turn.messages), offer=False)
    if not results:  # nothing to plan: no store read (a retrieval is still answered)
        return Prepared(ToolOutputPlan({}, frozenset(), {}), retrieval)
    record = await _record(store, key)
    sent = record.get(SENT)
    budget = context_window(turn.model, tenant, wire.window_asked(turn, request.headers)) - wire.answer_reserve(turn)
    keep = kept_turns(options.keep_turns, turn.messages, budget)
    chosen = Options(options.min_tokens, keep, frozenset(options.keep_tools), offered.wire(RETRIEVE))
    made = plan(turn.messages, chosen, sent if isinstance(sent, dict) else {}, _counter(counter, turn.model))
    kept = record.get(KEPT)
    await _remember(request, store, key, made, set(kept) if isinstance(kept, list) else set())
    return Prepared(made, replace(retrieval, offer=bool(made.contents)))


def reserve(tenant: TenantConfig, wire: WireAdapter, turn: Turn, counter: TokenCounter, results: bool) -> int:
    """Tokens ``ctxproxy_retrieve``'s definition may take: compaction keeps room for it in a
    conversation with tool results (``results``), when tool outputs are rewritten (else 0)."""
    if not (tenant.compaction.tool_outputs.enabled and tenant.tools.enabled and results):
        return 0
    offered = wire.offer_tools(turn, [RETRIEVE])
    return 0 if offered is None else counter.count_tools(offered.definitions, turn.model)


def apply(prepared: Prepared, added: Augmented, turn: Turn, counter: TokenCounter) -> Augmented:
    """``added`` with the planned contents in place of the client's tool messages it forwards."""
    made = prepared.plan
    wanted = {id(turn.messages[i]): i for i in made.contents}
    forwarded = added.messages if added.messages is not None else turn.messages
    out: list[dict[str, Any]] = []
    compressed = masked = fresh = saved = 0
    for message in forwarded:
        index = wanted.get(id(message))
        if index is None:
            out.append(dict(message) if not isinstance(message, dict) else message)
            continue
        changed = {**message, "content": made.contents[index]}
        saved += _tokens(counter, message, turn.model) - _tokens(counter, changed, turn.model)
        out.append(changed)
        if index in made.compressed:
            compressed += 1
            fresh += index in made.fresh_at
        else:
            masked += 1
    if not (compressed or masked):
        return added
    counts = ToolOutputCounts(compressed, masked, fresh, saved)
    return added._replace(messages=out, tokens=added.tokens - saved, tool_outputs=counts)


def kept_turns(configured: int, messages: Sequence[Mapping[str, Any]], budget: int) -> int:
    """How many of the newest agent turns may keep their results whole: ``keep_turns`` where the
    window holds them, else 1.

    Masking moves in steps of ``k`` turns, so just before a step ``k`` turns' results are whole.
    Where ``k`` turns as large as the conversation's largest so far would take more than
    ``KEEP_SHARE`` of ``budget`` (a small window, an agent's large results) the history strategy
    compacts every few requests whatever masking does: only the newest turn stays whole, and
    each request masks the one before, a placeholder's worth of new bytes at the end of the
    prompt. The largest turn so far only grows, and a keep of 1 masks at least as many turns as
    any other: the masked count never goes down within a conversation."""
    if configured <= 1:
        return configured
    largest = _largest_turn(messages) / CHARS_PER_TOKEN
    return configured if configured * largest <= KEEP_SHARE * budget else 1


def _largest_turn(messages: Sequence[Mapping[str, Any]]) -> int:
    """The characters of the largest agent turn's results (the tool messages after one assistant message)."""
    largest = current = 0
    for message in messages:
        role = message.get("role")
        if role == ROLE_ASSISTANT:
            current = 0
        elif role == ROLE_TOOL:
            current += _chars(message.get("content"))
            largest = max(largest, current)
    return largest


def _chars(content: object) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(p["text"]) for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return 0


def _tokens(counter: TokenCounter, message: Mapping[str, Any], model: str | None) -> int:
    return counter.count_message(message, message_digest(message), model)


def _counter(counter: TokenCounter, model: str | None) -> Callable[[str], int]:
    return lambda text: counter.count_text(text, model)


async def _record(store: Store, key: SessionKey) -> dict[str, Any]:
    try:
        value = await store.get(tool_outputs_key(key))
    except StoreError as exc:
        warn_store_failure(log, exc, "tool_outputs.store_unavailable", session=key.value, error=str(exc))
        return {}
    return value if isinstance(value, dict) else {}


async def _remember(request: web.Request, store: Store, key: SessionKey, made: ToolOutputPlan, kept: set[str]) -> None:
    """Note the newly compressed results and store the originals not stored yet, for the
    session's lifetime."""
    new = {ref: text for ref, text in made.originals.items() if ref not in kept}
    if not made.fresh and not new:
        return
    ttl = request.app[CONFIG].current.settings.store.session_ttl_days * 86400
    try:
        for ref, text in new.items():
            await store.put(tool_output_original_key(key, ref), {"text": text}, ttl=ttl)
        await store.update(tool_outputs_key(key), lambda old: _merged(old, made.fresh, new), ttl=ttl)
    except StoreError as exc:
        warn_store_failure(log, exc, "tool_outputs.store_unavailable", session=key.value, error=str(exc))


def _merged(old: Any, fresh: Mapping[str, str], kept: Mapping[str, str]) -> dict[str, Any]:
    record = old if isinstance(old, dict) else {}
    sent, stored = record.get(SENT), record.get(KEPT)
    return {
        SENT: {**(sent if isinstance(sent, dict) else {}), **fresh},
        KEPT: sorted({*(stored if isinstance(stored, list) else []), *kept}),
    }

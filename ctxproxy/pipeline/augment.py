"""What ctxproxy adds to a compacted request before it goes upstream: the memories that match
the newest user message (auto-injection) and its own tools, when there is something to recall.

The compaction engine decides which messages are forwarded; this module only adds to them, and
adjusts one message of its own: the summary message names the proxy tools as this request offers
them (renamed, or not at all) where its block kind words them (``paged``'s Contents Page does),
found by its position in the list ``assemble`` built and its exact stored text — never by what
a message looks like, so a client's message is never altered or dropped. A failing store costs
the request its memories, never the request itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from ctxproxy.compaction.assemble import summary_index
from ctxproxy.compaction.inputs import CompactionInput, CompactionOutcome
from ctxproxy.config.models import TenantConfig
from ctxproxy.memory.inject import inject, message_text
from ctxproxy.pipeline.recall import embed_query, find_memories
from ctxproxy.pipeline.turn import Augmented, Turn
from ctxproxy.pipeline.wire import WireAdapter
from ctxproxy.services import COMPACTOR, MEMORIES, STORE, TOKENS
from ctxproxy.session import message_digest
from ctxproxy.store import StoreError
from ctxproxy.strategies.base import Checkpoint, Message
from ctxproxy.strategies.boundaries import leading_system_count
from ctxproxy.strategies.kinds import BlockKinds
from ctxproxy.tokens import TokenCounter
from ctxproxy.tools.definitions import RECALL_PAGE, SEARCH_MEMORY, ProxyTools
from ctxproxy.tools.handlers import ToolAnswers, archived_entries
from ctxproxy.vocabulary import ROLE_USER


async def augment(
    request: web.Request,
    tenant: TenantConfig,
    wire: WireAdapter,
    chat: Turn,
    req: CompactionInput,
    outcome: CompactionOutcome,
) -> Augmented:
    app = request.app
    counter = app[TOKENS]
    found = await find_memories(request, tenant, chat, req, outcome.checkpoint)
    tools, answers = await _tools(request, tenant, wire, chat, req, outcome, found.any)
    messages: Sequence[Message] | None = outcome.messages
    tokens = outcome.tokens_after
    head = leading_system_count(chat.messages)
    raw_from = head  # where the client's raw messages start in what is forwarded
    summary_at: int | None = None
    if messages is not None and outcome.checkpoint is not None:
        at = summary_at = summary_index(chat.messages, head, outcome.checkpoint)
        head, raw_from = at, at + 1  # layered memories go after every system message, before the summary
        named = contents_for(messages, at, outcome.checkpoint, tools, app[COMPACTOR].kinds)
        if named is not None:
            tokens += _tokens_of([named[at]], counter, chat.model) - _tokens_of([messages[at]], counter, chat.model)
            messages = named
        if at < len(messages):  # what the summary says is not injected again
            found = found.without_said(message_text(messages[at]))
    injected = 0
    if found.any:
        injection = inject(
            messages if messages is not None else chat.messages,
            lambda text: counter.count_text(text, chat.model),
            tenant.compaction.summary_placement,
            near=found.near,
            front=found.front,
            head=head,
            raw_from=raw_from,
        )
        if injection.positions:
            messages, injected = injection.messages, injection.memories
            tokens += _tokens_of(injection.added, counter, chat.model)
            summary_at = _shifted(summary_at, injection.positions)
    if tools is not None:
        tokens += counter.count_tools(tools.definitions, chat.model)
    return Augmented(messages, tools, answers, tokens, injected, summary_at)


def _shifted(at: int | None, inserted: Sequence[int]) -> int | None:
    """Where the message at ``at`` is once messages were inserted at ``inserted`` (ascending
    positions in the new list)."""
    if at is None:
        return None
    for position in inserted:
        if position <= at:
            at += 1
    return at


def contents_for(
    forwarded: Sequence[Message], at: int, checkpoint: Checkpoint, tools: ProxyTools | None, kinds: BlockKinds
) -> list[Message] | None:
    """``forwarded`` with its summary message (at ``at``, where ``assemble`` put it) naming the
    tools this request offers, as the checkpoint's block kind words them (a Contents Page does);
    None when nothing changes (a kind that names no tools, or the default names). The message is
    recognised by its position and its exact stored text."""
    if at >= len(forwarded):
        return None
    message = forwarded[at]
    text = kinds.render(checkpoint.blocks)
    if message.get("content") != text:
        return None
    names = tools.wire_names if tools is not None else {}
    named = kinds.of(checkpoint.blocks).name_tools(text, names.get(RECALL_PAGE), names.get(SEARCH_MEMORY))
    if named == text:
        return None
    out = list(forwarded)
    out[at] = {**message, "content": named}
    return out


async def _tools(
    request: web.Request,
    tenant: TenantConfig,
    wire: WireAdapter,
    chat: Turn,
    req: CompactionInput,
    outcome: CompactionOutcome,
    found: bool,
) -> tuple[ProxyTools | None, ToolAnswers | None]:
    """ctxproxy's tools, offered only when there is something to recall: archived pages of this
    conversation, or memories in the request's scope."""
    if not tenant.tools.enabled:
        return None, None
    available: list[str] = []
    archived = archived_entries(outcome.checkpoint)
    if archived:
        available.append(RECALL_PAGE)
    if archived or found or (tenant.memory.enabled and await _has_memories(request, req)):
        available.append(SEARCH_MEMORY)
    tools = wire.offer_tools(chat, available) if available else None
    if tools is None:
        return None, None
    counter = request.app[TOKENS]
    answers = ToolAnswers(
        store=request.app[STORE],
        memories=request.app[MEMORIES],
        key=req.key,
        scope=req.memory_scope,
        checkpoint=outcome.checkpoint,
        turn=sum(1 for m in chat.messages if m.get("role") == ROLE_USER),
        clip=lambda text, limit: counter.clip_text(text, limit, chat.model),
        max_tokens=tenant.tools.result_max_tokens,
        embed_query=lambda query: embed_query(request, tenant, req, query),
        wire_names=tools.wire_names,
    )
    return tools, answers


async def _has_memories(request: web.Request, req: CompactionInput) -> bool:
    try:
        return await request.app[MEMORIES].has_docs(req.memory_scope)
    except StoreError:
        return False


def _tokens_of(messages: Sequence[Message], counter: TokenCounter, model: str | None) -> int:
    return sum(counter.count_message(m, message_digest(m), model) for m in messages)

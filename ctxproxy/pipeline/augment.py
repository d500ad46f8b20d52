"""What ctxproxy adds to a compacted request before it goes upstream: the memories that match
the newest user message (auto-injection) and its own tools, when there is something to recall.

All of it is placed so that the bytes the upstream has already seen stay as they were (providers
bill a repeated prefix at about a tenth): the layered blocks are pinned until the summary's first
message changes, a ``## Relevant Memories`` block is carried at the client message it was made
for and a new one only ever added at the newest user message (``ctxproxy.memory.carry``), and the
tools, once offered, stay offered until a compaction (``ctxproxy.memory.pins``).

The compaction engine decides which messages are forwarded; this module only adds to them, and
adjusts one message of its own: the summary message names the proxy tools as this request offers
them (renamed, or not at all) where its block kind words them (``paged``'s Contents Page does),
found by its position in the list ``assemble`` built and its exact stored text — never by what
a message looks like, so a client's message is never altered or dropped. A failing store costs
the request its memories, never the request itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import structlog
from aiohttp import web

from ctxproxy.compaction.assemble import summary_count, summary_index
from ctxproxy.compaction.inputs import CompactionInput, CompactionOutcome
from ctxproxy.config.models import TenantConfig
from ctxproxy.memory.carry import Checked, check, made
from ctxproxy.memory.inject import Insert, MemoryBlock, inject, message_text, newest_user_index
from ctxproxy.pipeline.recall import Found, embed_query, find_memories
from ctxproxy.pipeline.turn import Augmented, Turn
from ctxproxy.pipeline.wire import WireAdapter
from ctxproxy.services import COMPACTOR, MEMORIES, SESSION_PINS, STORE, TOKENS
from ctxproxy.session import message_digest
from ctxproxy.store import StoreError, warn_store_failure
from ctxproxy.strategies.base import Checkpoint, Message
from ctxproxy.strategies.boundaries import leading_system_count
from ctxproxy.strategies.kinds import BlockKinds
from ctxproxy.tokens import TokenCounter
from ctxproxy.tools.definitions import ORDER, RECALL_PAGE, RETRIEVE, SEARCH_MEMORY, ProxyTools
from ctxproxy.tools.handlers import ToolAnswers, archived_entries
from ctxproxy.tools.retrieve import Retrieval
from ctxproxy.vocabulary import ROLE_USER

log = structlog.get_logger(__name__)


async def augment(
    request: web.Request,
    tenant: TenantConfig,
    wire: WireAdapter,
    chat: Turn,
    req: CompactionInput,
    outcome: CompactionOutcome,
    retrieval: Retrieval | None = None,
) -> Augmented:
    """``retrieval``: what the request's ``ctxproxy_retrieve`` returns, when tool outputs are
    rewritten (``tool_outputs``), and whether the tool is offered."""
    app = request.app
    counter = app[TOKENS]
    injects = tenant.memory.enabled and tenant.memory.inject
    # Note 001's blocks: which of the carried ones still hold (without a coroutine when none are injected).
    checked = await _checked(request, chat, req, outcome.checkpoint) if injects and not tenant.memory.layered else None
    found = Found()
    if injects and (checked is None or _may_use(tenant, checked)):
        found = await find_memories(request, tenant, chat, req, outcome.checkpoint)
    tools, answers = await _tools(request, tenant, wire, chat, req, outcome, found.any, retrieval)
    messages: Sequence[Message] | None = outcome.messages
    tokens = outcome.tokens_after
    head: int | None = None  # where layered memories go: after the leading system messages, or before the summary
    summary_at: int | None = None
    if messages is not None and outcome.checkpoint is not None:
        kinds = app[COMPACTOR].kinds
        at = head = summary_index(chat.messages, leading_system_count(chat.messages), outcome.checkpoint, req.system_at)
        summary_at = at + summary_count(outcome.checkpoint, kinds) - 1  # its last message
        named = contents_for(messages, at, outcome.checkpoint, tools, kinds)
        if named is not None:
            tokens += _tokens_of([named[at]], counter, chat.model) - _tokens_of([messages[at]], counter, chat.model)
            messages = named
        # what the summary says is not injected again
        found = found.without_said("\n\n".join(message_text(m) for m in messages[at : summary_at + 1]))
    forwarded = messages if messages is not None else chat.messages
    count = partial(_count_text, counter, chat.model)
    inserts = _carried(request, tenant, chat, req, outcome.checkpoint, checked, found.near, forwarded, count)
    injected = 0
    if inserts or found.front:  # else nothing is injected (and the list is not copied to say so)
        if head is None:
            head = leading_system_count(chat.messages)
        injection = inject(
            forwarded, count, tenant.compaction.summary_placement, inserts=inserts, front=found.front, head=head
        )
        if injection.positions:
            messages, injected = injection.messages, injection.memories
            tokens += _tokens_of(injection.added, counter, chat.model)
            summary_at = _shifted(summary_at, injection.positions)
    if tools is not None:
        tokens += counter.count_tools(tools.definitions, chat.model)
    return Augmented(messages, tools, answers, tokens, injected, summary_at)


async def _checked(request: web.Request, chat: Turn, req: CompactionInput, checkpoint: Checkpoint | None) -> Checked:
    """Which of the session's carried ``## Relevant Memories`` blocks this request still holds
    (``ctxproxy.memory.carry.check``), when note 001's blocks are injected (the caller knows)."""
    previous = request.app[SESSION_PINS].carried(req.memory_scope)
    gone = await _gone(request, req, previous.ids if previous is not None else frozenset())
    cut = _cut(checkpoint)
    newest = newest_user_index(chat.messages, max(cut, leading_system_count(chat.messages)))
    return check(previous, req.chain, newest, cut, gone)


def _may_use(tenant: TenantConfig, checked: Checked) -> bool:
    """Whether what the memory search finds can change the request: not when no new block can be
    made (the carried blocks used the budget, or the newest user message was asked before). The
    tools do not need it either: a hit means the scope has memories, which ``_tools`` then
    asks the store. With embeddings the search (and its embeddings call) is made as before."""
    memory = tenant.memory
    return bool(memory.embeddings_model) or checked.wants(memory.inject_max_tokens, memory.inject_top_k)


def _carried(
    request: web.Request,
    tenant: TenantConfig,
    chat: Turn,
    req: CompactionInput,
    checkpoint: Checkpoint | None,
    checked: Checked | None,
    wanted: MemoryBlock | None,
    forwarded: Sequence[Message],
    count: Callable[[str], int],
) -> list[Insert]:
    """Note 001's ``## Relevant Memories`` blocks this request carries (``ctxproxy.memory.carry``),
    each placed at its client message in ``forwarded``."""
    if checked is None:
        return []
    carried = made(checked, chat.messages, wanted, tenant.memory.inject_top_k, count)
    request.app[SESSION_PINS].carry(req.memory_scope, carried)
    at = client_positions(forwarded, chat.messages, _cut(checkpoint))
    placed = [block for block in carried.placed if block.at.index in at]
    return [Insert(at[block.at.index], block.text, block.count, block.after) for block in placed]


async def _gone(request: web.Request, req: CompactionInput, ids: frozenset[str]) -> frozenset[str]:
    """Which of the documents ``ids`` were deleted since they were injected; all of them when the
    store cannot say (a failing store costs the request its memories)."""
    if not ids:
        return ids
    try:
        return ids - await request.app[MEMORIES].present(req.memory_scope, ids)
    except StoreError as exc:
        warn_store_failure(log, exc, "memory.search_failed", session=req.key.value, error=str(exc))
        return ids


def _cut(checkpoint: Checkpoint | None) -> int:
    """Where the request's raw messages begin: the checkpoint's end, else 0."""
    return checkpoint.end if checkpoint is not None else 0


def client_positions(forwarded: Sequence[Message], client: Sequence[Message], start: int) -> dict[int, int]:
    """Where each client message from ``start`` on is in ``forwarded``, by index. ``assemble``
    forwards the client's own message objects, in order, with ctxproxy's between them, so they
    are found by identity, from the end; one that is not there (it was not forwarded as it came)
    and every one before it are left out."""
    out: dict[int, int] = {}
    j = len(forwarded) - 1
    for i in range(len(client) - 1, start - 1, -1):
        while j >= 0 and forwarded[j] is not client[i]:
            j -= 1
        if j < 0:
            break
        out[i] = j
        j -= 1
    return out


def _count_text(counter: TokenCounter, model: str | None, text: str) -> int:
    return counter.count_text(text, model)


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
    retrieval: Retrieval | None,
) -> tuple[ProxyTools | None, ToolAnswers | None]:
    """ctxproxy's tools, offered when there is something to recall — archived pages of this
    conversation, or memories in the request's scope — and, once offered, to every request of the
    session until a compaction (``ctxproxy.memory.pins``): the tool list opens the prompt, and a
    tool that came and went would change its first bytes."""
    if not tenant.tools.enabled:
        return None, None
    pins, scope, checkpoint = request.app[SESSION_PINS], req.memory_scope, outcome.checkpoint
    available = set(pins.offered(scope, checkpoint))  # offered before: offered again until a compaction
    archived = archived_entries(checkpoint)
    if archived:
        available.add(RECALL_PAGE)
    if SEARCH_MEMORY not in available and (
        archived or found or (tenant.memory.enabled and await _has_memories(request, req))
    ):
        available.add(SEARCH_MEMORY)
    if retrieval is not None and retrieval.offer:
        available.add(RETRIEVE)
    tools = wire.offer_tools(chat, [name for name in ORDER if name in available]) if available else None
    if tools is None:
        return None, None
    pins.offer(scope, checkpoint, frozenset(tools.wire_names.keys()))
    counter = request.app[TOKENS]
    answers = ToolAnswers(
        store=request.app[STORE],
        memories=request.app[MEMORIES],
        key=req.key,
        scope=req.memory_scope,
        checkpoint=outcome.checkpoint,
        turn=lambda: sum(1 for m in chat.messages if m.get("role") == ROLE_USER),
        clip=lambda text, limit: counter.clip_text(text, limit, chat.model),
        max_tokens=tenant.tools.result_max_tokens,
        embed_query=lambda query: embed_query(request, tenant, req, query),
        wire_names=tools.wire_names,
        originals=retrieval.originals if retrieval is not None else None,
    )
    return tools, answers


async def _has_memories(request: web.Request, req: CompactionInput) -> bool:
    try:
        return await request.app[MEMORIES].has_docs(req.memory_scope)
    except StoreError:
        return False


def _tokens_of(messages: Sequence[Message], counter: TokenCounter, model: str | None) -> int:
    return sum(counter.count_message(m, message_digest(m), model) for m in messages)

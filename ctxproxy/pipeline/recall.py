"""Which memories a request gets injected: the search side of auto-injection (I/O).

Searched with the newest user message (``ctxproxy.memory.inject.query_for``), with its
embedding when the tenant fuses embeddings:

- note 001 (``[memory] layered = false``): the best ``inject_top_k`` of all the request's
  layers, the memories a ``## Relevant Memories`` block of ``inject_max_tokens`` may hold (which
  of them are sent, and where, is ``ctxproxy.memory.carry``'s business);
- note 002 (``layered``): each of the request's user and scope layers on its own, the best
  ``user_top_k`` / ``scope_top_k`` of it in a block of ``user_max_tokens`` / ``scope_max_tokens``
  — the user's (a profile holds for every question) topped up with its newest cards — chosen
  once per session and reused until the summary's first message changes
  (``ctxproxy.memory.pins``: the prompt's start keeps its bytes between two compressions). The
  session layer is not injected: what it holds, the compressions' cards, the summary already
  says, and it stays searchable with ``search_memory``.

A failing store costs the request its memories, never the request itself.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog
from aiohttp import web

from ctxproxy.compaction.inputs import CompactionInput
from ctxproxy.config.models import MemoryConfig, TenantConfig
from ctxproxy.memory.cards import MemoryCard, doc_label
from ctxproxy.memory.embeddings import embed
from ctxproxy.memory.inject import HEADER, LAYER_HEADERS, Memory, MemoryBlock, query_for, with_newest
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import LayerKind, MemoryScope
from ctxproxy.pipeline.turn import Turn
from ctxproxy.services import HTTP, MEMORIES, SESSION_PINS, TOKENS
from ctxproxy.store import StoreError, warn_store_failure
from ctxproxy.strategies.base import Checkpoint

__all__ = ["Found", "embed_query", "find_memories"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Found:
    """The blocks to inject: ``front`` (layered) or ``near`` (``## Relevant Memories``)."""

    near: MemoryBlock | None = None
    front: tuple[MemoryBlock, ...] = ()

    @property
    def any(self) -> bool:
        return any(block.memories for block in (*self.front, *([self.near] if self.near else [])))

    def without_said(self, said: str) -> Found:
        """Each block without what ``said`` (the forwarded summary) already says."""
        near = self.near.without_said(said) if self.near is not None else None
        return Found(near, tuple(block.without_said(said) for block in self.front))


async def find_memories(
    request: web.Request, tenant: TenantConfig, chat: Turn, req: CompactionInput, checkpoint: Checkpoint | None
) -> Found:
    """``checkpoint``: what the request is forwarded with (the layered blocks are pinned to it)."""
    memory = tenant.memory
    if not (memory.enabled and memory.inject):
        return Found()
    query = query_for(chat.messages)
    if query is None:
        return Found()
    memories, pins = request.app[MEMORIES], request.app[SESSION_PINS]
    try:
        if memory.layered and (pinned := pins.layers(req.memory_scope, checkpoint)) is not None:
            return Found(front=pinned)
        vector = await embed_query(request, tenant, req, query)
        if memory.layered:
            count = request.app[TOKENS].count_text
            found = await _layers(memories, memory, req.memory_scope, query, vector)
            front = tuple(block.kept_rendered(lambda text: count(text, chat.model)) for block in found)
            pins.pin_layers(req.memory_scope, checkpoint, front)
            return Found(front=front)
        hits = await memories.search(req.memory_scope, query, memory.inject_top_k, query_vector=vector)
    except StoreError as exc:
        warn_store_failure(log, exc, "memory.search_failed", session=req.key.value, error=str(exc))
        return Found()
    return Found(near=MemoryBlock(HEADER, [_memory(hit.doc) for hit in hits], memory.inject_max_tokens))


async def _layers(
    memories: MemoryStore, config: MemoryConfig, scope: MemoryScope, query: str, vector: list[float] | None
) -> tuple[MemoryBlock, ...]:
    """Note 002's User and Scope Memory blocks, those of the layers the request names."""
    plan: list[tuple[LayerKind, int, int]] = [
        ("user", config.user_top_k, config.user_max_tokens),
        ("scope", config.scope_top_k, config.scope_max_tokens),
    ]

    async def block(kind: LayerKind, top_k: int, max_tokens: int) -> MemoryBlock | None:
        layer = scope.layer(kind)
        if layer is None or top_k == 0:
            return None
        hits = await memories.search_layers([layer], query, top_k, query_vector=vector)
        docs: list[MemoryCard] = [hit.doc for hit in hits]
        if kind == "user" and len(docs) < top_k:
            docs = with_newest(docs, await memories.newest(layer, top_k), top_k)
        return MemoryBlock(LAYER_HEADERS[kind], [_memory(doc) for doc in docs], max_tokens, chronological=True)

    blocks = await asyncio.gather(*(block(*planned) for planned in plan))
    return tuple(found for found in blocks if found is not None)


async def embed_query(
    request: web.Request, tenant: TenantConfig, req: CompactionInput, query: str
) -> list[float] | None:
    """The query's embedding when the tenant fuses embeddings with BM25; None (BM25 alone) when
    it does not, or when the embeddings call fails."""
    model = tenant.memory.embeddings_model
    if not model:
        return None
    vectors = await embed(
        request.app[HTTP], tenant.upstream, model, [query], req.authorization, tenant.memory.embeddings_timeout
    )
    return vectors[0] if vectors else None


def _memory(doc: MemoryCard) -> Memory:
    return Memory(doc.content, doc_label(doc), doc.created_at, doc.id)

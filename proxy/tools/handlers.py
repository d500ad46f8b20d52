"""Answering the proxy-side tools from the Store: ``recall_page`` and ``search_memory``.

One ``ToolAnswers`` per request: it knows the session, the checkpoint the request was forwarded
with (its Contents Page lists the archived pages), the memory scope and the current turn. An
answer is always a string for the model — a bad argument, an unknown page or a store failure is
explained to the model rather than failing the user's request. Recalling a page counts: its
recall statistics (count, last turn) are what the Contents Page's eviction rules read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from proxy.compaction.checkpoints import page_key, recall_key
from proxy.memory.contents import ContentsEntry, decode_entries, decode_stats, encode_stats, record_recall
from proxy.memory.memories import MemoryStore
from proxy.memory.scopes import MemoryScope
from proxy.session.identity import SessionKey
from proxy.store import Store, StoreError
from proxy.strategies.base import Checkpoint
from proxy.summarize.transcript import render_message
from proxy.tools.definitions import RECALL_PAGE, SEARCH_MEMORY

log = structlog.get_logger(__name__)
DEFAULT_TOP_K = 5
MAX_TOP_K = 10


def archived_entries(checkpoint: Checkpoint | None) -> list[ContentsEntry]:
    """The pages a checkpoint archived, listed or evicted; empty for non-paged checkpoints."""
    if checkpoint is None or not any(b.kind == "contents" for b in checkpoint.blocks):
        return []
    return decode_entries(checkpoint.state)


class ToolAnswers:
    def __init__(
        self,
        *,
        store: Store,
        memories: MemoryStore,
        key: SessionKey,
        scope: MemoryScope,
        checkpoint: Checkpoint | None,
        turn: int,
        clip: Callable[[str, int], str],
        max_tokens: int,
        embed_query: Callable[[str], Awaitable[list[float] | None]] | None = None,
    ) -> None:
        self._store = store
        self._memories = memories
        self._key = key
        self._scope = scope
        self._entries = {e.page: e for e in archived_entries(checkpoint)}
        self._turn = turn
        self._clip = clip
        self._max_tokens = max_tokens
        self._embed_query = embed_query
        self.calls = 0

    async def __call__(self, name: str, arguments: Mapping[str, Any] | None, raw: str) -> str:
        self.calls += 1
        try:
            if name == RECALL_PAGE:
                return await self._recall(arguments)
            if name == SEARCH_MEMORY:
                return await self._search(arguments)
        except StoreError as exc:
            log.warning("tool.store_unavailable", tool=name, error=str(exc))
            return "The archive is unavailable right now; answer from what you have."
        return f"Unknown tool {name!r}."

    async def _recall(self, arguments: Mapping[str, Any] | None) -> str:
        page = _integer((arguments or {}).get("page_index"))
        if page is None:
            return 'recall_page needs {"page_index": <page number from the Contents Page>}.'
        entry = self._entries.get(page)
        if entry is None:
            listed = ", ".join(str(p) for p in sorted(self._entries)) or "none"
            return f"There is no archived page #{page}. Archived pages: {listed}."
        stored = await self._store.get(page_key(self._key, entry.key))
        messages = stored.get("messages") if isinstance(stored, dict) else None
        if not isinstance(messages, list):
            return f"Page #{page} is no longer stored."
        turn = self._turn
        await self._store.update(
            recall_key(self._key), lambda v: encode_stats(record_recall(decode_stats(v), page, turn))
        )
        body = "\n\n".join(render_message(m) for m in messages if isinstance(m, dict))
        header = f"## Page #{page} (messages {entry.start + 1}-{entry.end} of this conversation)\n\n"
        return header + self._clip(body, self._max_tokens)

    async def _search(self, arguments: Mapping[str, Any] | None) -> str:
        query = (arguments or {}).get("query")
        if not isinstance(query, str) or not query.strip():
            return 'search_memory needs {"query": "<what to look for>"}.'
        top_k = _integer((arguments or {}).get("top_k")) or DEFAULT_TOP_K
        vector = await self._embed_query(query) if self._embed_query is not None else None
        hits = await self._memories.search(self._scope, query, min(max(top_k, 1), MAX_TOP_K), query_vector=vector)
        if not hits:
            return f"No memories match {query!r}."
        share = max(100, self._max_tokens // len(hits))
        return "\n".join(_hit_line(i, hit.doc, share, self._clip, self._entries) for i, hit in enumerate(hits, 1))


def _hit_line(
    rank: int, doc: Any, share: int, clip: Callable[[str, int], str], entries: Mapping[int, ContentsEntry]
) -> str:
    if doc.kind == "page" and doc.page is not None:
        more = f" (recall_page {doc.page} for all of it)" if doc.page in entries else ""
        return f"{rank}. [page {doc.page}]{more} {clip(doc.content, share)}"
    where = f", page {doc.page}" if doc.page is not None else ""
    return f"{rank}. [{doc.type}{where}] {clip(doc.content, share)}"


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("#").isdigit():
        return int(value.strip().lstrip("#"))
    return None

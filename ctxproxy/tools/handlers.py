"""Answering the proxy-side tools: ``recall_page`` and ``search_memory`` from the Store,
``retrieve`` from the tool outputs the request names (``ctxproxy.tools.retrieve``).

One ``ToolAnswers`` per request: it knows the session, the checkpoint the request was forwarded
with (its Contents Page lists the archived pages), the memory scope and the current turn. An
answer is always a string for the model, at most the tokens the loop allows for it (and at most
``max_tokens``): a bad argument, an unknown page or a store failure is explained to the model —
in words it can act on, never by echoing a huge argument back — rather than failing the user's
request. Recalling a page counts: its recall statistics (count, last turn) are what the Contents
Page's eviction rules read.

Arguments are read leniently, as the tools' schemas (``definitions``) describe them: a page number
may come as ``3``, ``3.0``, ``"3"`` or ``"#3"``; ``top_k`` outside 1–10 is clamped and said so;
a query longer than ``QUERY_MAX_CHARS`` is searched by its start, as auto-injection does.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import orjson
import structlog

from ctxproxy.memory.cards import doc_label
from ctxproxy.memory.inject import QUERY_MAX_CHARS
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import MemoryScope
from ctxproxy.session.identity import SessionKey
from ctxproxy.store import Store, StoreError, warn_store_failure
from ctxproxy.store.keys import archived_page_key, page_recalls_key
from ctxproxy.strategies.base import Checkpoint
from ctxproxy.strategies.paged.contents import ContentsEntry, archive_index, decode_stats, encode_stats, record_recall
from ctxproxy.summarize.transcript import render_message
from ctxproxy.tools.definitions import (
    ORDER,
    RECALL_PAGE,
    RETRIEVE,
    SEARCH_MEMORY,
    SEARCH_TOP_K_DEFAULT,
    SEARCH_TOP_K_MAX,
    WIRE_PREFIX,
)
from ctxproxy.tools.retrieve import Originals, answer_retrieve

log = structlog.get_logger(__name__)

UNAVAILABLE = "The archive is unavailable right now; answer from what you have."
HEADER_TOKENS = 32  # what a recalled page's header line takes, kept out of the page's share
HIT_PREFIX_TOKENS = 12  # "3. [decision, page 12] " and the line break
ECHO_CHARS = 80  # at most this much of a bad argument is quoted back
_LISTED = 20  # pages listed one by one in an explanation; more are given as spans
_MAX_DIGITS = 9  # no conversation has a billion pages: longer numbers are not page numbers
_EXAMPLES = {
    RECALL_PAGE: '{"page_index": 3}',
    SEARCH_MEMORY: '{"query": "database migration decision", "top_k": 5}',
    RETRIEVE: '{"ref": "r0123456789abcdef", "query": "FAILED"}',
}


def archived_entries(checkpoint: Checkpoint | None) -> list[ContentsEntry]:
    """The pages a checkpoint archived, listed or evicted: the archive index ``paged`` keeps in
    its checkpoints' state; empty for a checkpoint that keeps none."""
    return checkpoint.decoded(archive_index).entries if checkpoint is not None else []


class ToolAnswers:
    def __init__(
        self,
        *,
        store: Store,
        memories: MemoryStore,
        key: SessionKey,
        scope: MemoryScope,
        checkpoint: Checkpoint | None,
        turn: Callable[[], int],
        clip: Callable[[str, int], str],
        max_tokens: int,
        embed_query: Callable[[str], Awaitable[list[float] | None]] | None = None,
        wire_names: Mapping[str, str] | None = None,
        originals: Originals | None = None,
    ) -> None:
        self._store = store
        self._memories = memories
        self._key = key
        self._scope = scope
        self._entries = checkpoint.decoded(archive_index).by_page if checkpoint is not None else {}  # read only
        self._turn = turn  # the request's turn (its user messages), counted only when a page is recalled
        self._clip = clip
        self._max_tokens = max_tokens
        self._embed_query = embed_query
        self._originals = originals  # the tool outputs ``ctxproxy_retrieve`` returns
        # the names the model knows the tools by (``ProxyTools.wire_names``, which holds only the
        # tools this request was offered): every answer uses them
        self._names = {n: WIRE_PREFIX + n for n in ORDER} | dict(wire_names or {})
        self.calls: dict[str, int] = {}  # calls answered, per tool (any other name as "unknown")

    async def __call__(self, name: str, arguments: Mapping[str, Any] | None, raw: str, limit: int | None = None) -> str:
        """The answer to one call; ``limit``: the most tokens it may take (the loop's share of the window)."""
        known = name if name in _EXAMPLES else "unknown"
        self.calls[known] = self.calls.get(known, 0) + 1
        tokens = self._max_tokens if limit is None else max(1, min(limit, self._max_tokens))
        if name not in _EXAMPLES:
            return f"Unknown tool {_echo(name)}."
        if arguments is None:
            return _not_an_object(name, self._names[name], raw)
        try:
            if name == RECALL_PAGE:
                return await self._recall(arguments, tokens)
            if name == RETRIEVE:
                return await answer_retrieve(arguments, self._originals, self._names[RETRIEVE], self._clip, tokens)
            return await self._search(arguments, tokens)
        except StoreError as exc:
            warn_store_failure(log, exc, "tool.store_unavailable", tool=name, error=str(exc))
            return UNAVAILABLE

    async def _recall(self, arguments: Mapping[str, Any], tokens: int) -> str:
        if "page_index" not in arguments:
            name = self._names[RECALL_PAGE]
            return f'{name} needs "page_index", the page number from the Contents Page: {_EXAMPLES[RECALL_PAGE]}.'
        page = whole_number(arguments["page_index"])
        if isinstance(page, str):
            return f"page_index must be {page}; use a page number from the Contents Page: {_EXAMPLES[RECALL_PAGE]}."
        listed = f"Archived pages: {page_ranges(self._entries) or 'none'}."
        if page < 1:
            return f"Page numbers start at 1. {listed}"
        entry = self._entries.get(page)
        if entry is None:
            return f"There is no archived page #{page}. {listed}"
        stored = await self._store.get(archived_page_key(self._key, entry.key))
        messages = stored.get("messages") if isinstance(stored, dict) else None
        if not isinstance(messages, list):
            return f"Page #{page} is no longer stored; call {self._names[SEARCH_MEMORY]} to find what it held."
        turn = self._turn()
        await self._store.update(
            page_recalls_key(self._key), lambda v: encode_stats(record_recall(decode_stats(v), entry.key, turn))
        )
        body = "\n\n".join(render_message(m) for m in messages if isinstance(m, dict))
        header = f"## {entry.title} (messages {entry.start + 1}-{entry.end} of this conversation)\n\n"
        return header + self._clip(body, max(1, tokens - HEADER_TOKENS))

    async def _search(self, arguments: Mapping[str, Any], tokens: int) -> str:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            name = self._names[SEARCH_MEMORY]
            return f'{name} needs "query", a non-empty text of what to look for: {_EXAMPLES[SEARCH_MEMORY]}.'
        notes = []
        if len(query) > QUERY_MAX_CHARS:
            query = query[:QUERY_MAX_CHARS]
            notes.append(f"Note: the query was searched by its first {QUERY_MAX_CHARS} characters.")
        top_k, note = _top_k(arguments.get("top_k"))
        if note:
            notes.append(note)
        vector = await self._embed_query(query) if self._embed_query is not None else None
        hits = await self._memories.search(self._scope, query, top_k, query_vector=vector)
        if not hits:
            return "\n".join([*notes, f"No memories match {_echo(query)}."])
        share = max(16, tokens // len(hits) - HIT_PREFIX_TOKENS)
        recall = self._names[RECALL_PAGE]
        lines = [_hit_line(i, hit.doc, share, self._clip, self._entries, recall) for i, hit in enumerate(hits, 1)]
        return "\n".join([*notes, *lines])


def whole_number(value: object) -> int | str:
    """``value`` as a whole number (``3``, ``3.0``, ``"3"``, ``"#3"``), else what it should have been."""
    if isinstance(value, bool):
        return f"a number, not {str(value).lower()}"
    if isinstance(value, int):
        return value if abs(value) < 10**_MAX_DIGITS else "a page number, not a number that large"
    if isinstance(value, float):
        return whole_number(int(value)) if value.is_integer() else f"a whole number, not {value}"
    if isinstance(value, str):
        text = value.strip().removeprefix("#").strip()
        sign = -1 if text.startswith("-") else 1
        digits = text.removeprefix("-")
        if digits.isascii() and digits.isdigit():
            return sign * int(digits) if len(digits) <= _MAX_DIGITS else "a page number, not a number that large"
        return f"a number, not {_echo(value)}"
    if value is None:
        return "a number, not null"
    return f"a number, not a JSON {'array' if isinstance(value, list) else 'object'}"


def _top_k(value: object) -> tuple[int, str]:
    """The number of results to return, and a note for the model when it asked for something else."""
    if value is None:
        return SEARCH_TOP_K_DEFAULT, ""
    number = whole_number(value)
    if isinstance(number, str):
        return SEARCH_TOP_K_DEFAULT, f"Note: top_k must be {number}; used {SEARCH_TOP_K_DEFAULT}."
    clamped = min(max(number, 1), SEARCH_TOP_K_MAX)
    if clamped != number:
        return clamped, f"Note: top_k must be 1-{SEARCH_TOP_K_MAX}; used {clamped}."
    return clamped, ""


def page_ranges(pages: Iterable[int]) -> str:
    """The page numbers, ``1, 2, 3``; beyond ``_LISTED`` pages as spans, ``1-40, 42, 45-60``, so
    the list stays short however many pages there are."""
    ordered = sorted(pages)
    if len(ordered) <= _LISTED:
        return ", ".join(str(page) for page in ordered)
    spans: list[list[int]] = []
    for page in ordered:
        if spans and page == spans[-1][1] + 1:
            spans[-1][1] = page
        else:
            spans.append([page, page])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _not_an_object(name: str, wire_name: str, raw: str) -> str:
    try:
        json.loads(raw or "{}")
    except ValueError:
        return f"The arguments were not valid JSON ({_echo(raw)}). Call {wire_name} again with e.g. {_EXAMPLES[name]}."
    return f"The arguments must be a JSON object, e.g. {_EXAMPLES[name]}."


def _echo(value: str) -> str:
    """A quote of what the model sent, short: the model needs to recognise it, not to read it again."""
    if len(value) <= ECHO_CHARS:
        return orjson.dumps(value).decode()
    return orjson.dumps(value[:ECHO_CHARS]).decode() + f" (… {len(value) - ECHO_CHARS} more characters)"


def _hit_line(
    rank: int,
    doc: Any,
    share: int,
    clip: Callable[[str, int], str],
    entries: Mapping[int, ContentsEntry],
    recall_name: str,
) -> str:
    if doc.kind == "page" and doc.page is not None:
        more = f" ({recall_name} {doc.page} for all of it)" if doc.page in entries else ""
        return f"{rank}. [{doc_label(doc)}]{more} {clip(doc.content, share)}"
    return f"{rank}. [{doc_label(doc)}] {clip(doc.content, share)}"

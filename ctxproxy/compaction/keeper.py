"""What a compaction keeps besides its checkpoint, and the engine's side of an executor's I/O.

- ``remember_summary``: the memory cards of a summary a plan just wrote, and one of the
  summarised range's paths, commands and error lines (``ctxproxy.memory.work_doc``) (memory on);
- ``remember``: write documents (``ctxproxy.memory.writer``: embedded first when the tenant
  fuses embeddings; a failing store or embeddings call is logged and never fails the
  compaction); with layered memory, to the session layer alone;
- ``RequestHost``: one request's ``ExecutionHost`` (``ctxproxy.strategies.execution``), lent to a
  block kind's executor (``paged``'s archive step, the branch summary): the Store with the
  session's page and recall keys, the tenant's options, token counts for the request's model,
  one-line page summaries and branch summaries by the tenant's summariser (its LLM, else
  extractive), and archived pages made searchable (a page document, and one of the page's
  paths, commands and error lines, always: evicted pages must stay findable; the pages' memory
  cards when memory is on).

A request without an identity (``MemoryScope.lineage``) stamps each document with the lineage
it was derived from (``ctxproxy.session.lineage``): a summary's cards with the messages up to the
summary's end, a page's copy and cards with the messages up to the page's end.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ctxproxy.compaction.inputs import CompactionInput
from ctxproxy.memory.cards import MemoryCard, cards_from_messages, cards_from_summary, page_doc
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import LayerKind, MemoryScope
from ctxproxy.memory.work_doc import work_doc
from ctxproxy.memory.writer import MemoryWriter
from ctxproxy.session.lineage import Lineage
from ctxproxy.store import Store
from ctxproxy.store.keys import archived_page_key, page_recalls_key
from ctxproxy.strategies.base import Checkpoint, Message, Plan, StrategyOptions
from ctxproxy.strategies.paged.archive import ArchivedPage
from ctxproxy.strategies.paged.lines import PageLines
from ctxproxy.summarize.base import Summarizer, SummaryTask
from ctxproxy.summarize.pagelines import extractive_page_lines, llm_page_lines
from ctxproxy.tokens import TokenCounter
from ctxproxy.upstream.client import UpstreamHttp


class Keeper:
    def __init__(self, store: Store, memories: MemoryStore, counter: TokenCounter, http: UpstreamHttp) -> None:
        self.store = store
        self.counter = counter
        self._writer = MemoryWriter(memories, http)
        self._http = http

    async def remember_summary(self, req: CompactionInput, plan: Plan, made: Checkpoint) -> None:
        if not req.tenant.memory.enabled:
            return
        written = [b for b in made.blocks if b.end > plan.start or plan.merge]
        source = f"session {req.key.value}, messages {plan.start + 1}-{plan.end}"
        now = time.time()
        cards = [card for b in written for card in cards_from_summary(b.text, source, now)]
        work = work_doc(None, req.messages[plan.start : plan.end], source, now)
        cards += [work] if work is not None and written else []
        await self.remember(req, _bound(req.memory_scope, cards, made.end))

    async def page_lines(self, req: CompactionInput, pages: Sequence[Sequence[Message]]) -> tuple[list[PageLines], str]:
        """One line per archived message and per page: the LLM's, else extractive ones."""
        config = req.tenant.compaction
        if config.summarizer == "llm" and pages:
            made = await llm_page_lines(req.completions(self._http), req.summary_model, pages)
            if made is not None:
                return made, "llm"
        return [extractive_page_lines(page) for page in pages], "extractive"

    async def remember(self, req: CompactionInput, docs: Sequence[MemoryCard]) -> None:
        """Write memory documents; a failure is logged, never fails the compaction. With layered
        memory (note 002's ``sessionOnly``) a compression writes the session layer alone: the
        user and scope layers get what each round says (``ctxproxy.memory.after_round``)."""
        session_only: tuple[LayerKind, ...] | None = ("session",) if req.tenant.memory.layered else None
        await self._writer.write(
            req.tenant, req.memory_scope, docs, authorization=req.authorization, session=req.key.value, to=session_only
        )

    async def remember_pages(self, req: CompactionInput, pages: Sequence[ArchivedPage], now: float) -> None:
        """Archived pages, findable by memory search: page documents (and the page's paths, commands
        and errors, ``work_doc``) always, cards when memory is on."""
        docs: list[MemoryCard] = []
        scope = req.memory_scope
        for page in pages:
            source = f"session {req.key.value}, page {page.page}"
            found = [page_doc(page.page, page.messages, source, now, page.when)]
            work = work_doc(page.page, page.messages, source, now, page.when)
            found += [work] if work is not None else []
            if req.tenant.memory.enabled:
                found.extend(cards_from_messages(page.messages, source, now, page.page, page.when))
            docs.extend(_bound(scope, found, page.end))
        await self.remember(req, docs)

    def host(self, req: CompactionInput, summarizer: Summarizer) -> RequestHost:
        return RequestHost(self, req, summarizer)


class RequestHost:
    """``req``'s ``ExecutionHost``: what a block kind's executor may read, call and write;
    ``summarizer``: the tenant's, for ``req``."""

    def __init__(self, keeper: Keeper, req: CompactionInput, summarizer: Summarizer) -> None:
        self._keeper = keeper
        self._req = req
        self._summarizer = summarizer

    @property
    def store(self) -> Store:
        return self._keeper.store

    @property
    def options(self) -> StrategyOptions:
        config = self._req.tenant.compaction
        options: StrategyOptions = config.options[config.strategy]
        return options

    def page_key(self, suffix: str) -> str:
        return archived_page_key(self._req.key, suffix)

    def recall_key(self) -> str:
        return page_recalls_key(self._req.key)

    def count_text(self, text: str) -> int:
        return self._keeper.counter.count_text(text, self._req.model)

    async def page_lines(self, pages: Sequence[Sequence[Message]]) -> tuple[list[PageLines], str]:
        return await self._keeper.page_lines(self._req, pages)

    async def summarize_branch(self, messages: Sequence[Message], max_tokens: int) -> tuple[str, str]:
        made = await self._summarizer.summarize(SummaryTask("branch", messages, max_tokens=max_tokens))
        return made.text, made.summarizer

    async def remember_pages(self, pages: Sequence[ArchivedPage], now: float) -> None:
        await self._keeper.remember_pages(self._req, pages, now)


def _bound(scope: MemoryScope, docs: Iterable[MemoryCard], end: int) -> list[MemoryCard]:
    """``docs`` derived from the first ``end`` messages, with that lineage when the request is anonymous."""
    if scope.lineage is None:
        return list(docs)
    lineage = (Lineage.of(scope.lineage, end),)
    return [replace(doc, lineage=lineage) for doc in docs]

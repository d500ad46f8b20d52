"""After every round (note 002): the user and scope memories of the rounds a request finished,
written off the request path.

``RoundMemory.after`` looks at each request of a tenant with layered memory. When the request
names a user or a scope (anonymous conversations have no such layers), it takes the finished
rounds (``round_cards.completed_rounds``) that this process has not seen finished before — an
LRU of each round's prefix hash, per identity, so a regenerated answer or an edited question
is not a new round; normally the one round the request finished, at most
``MAX_ROUNDS_AT_ONCE`` of a history seen for the first time — and spawns one background task:

- with the LLM summariser, one small call of the summary model in the request's protocol
  (``ctxproxy.summarize.round_notes``); when it fails, and with the extractive summariser, the
  deterministic extraction of each round (``round_cards.extract_round``);
- the profile goes to the user layer, the project's facts to the scope layer
  (``MemoryWriter``: embedded when the tenant fuses embeddings); a layer the request does not
  name gets nothing. The session layer gets nothing here: it is written at compression.

The request never waits for it; a failure costs only those rounds' memories (logged). Another
replica seeing the same rounds again writes the same cards (de-duplicated by content) — with
the LLM summariser, at the price of one more call.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ctxproxy.background import BackgroundTasks
from ctxproxy.cache import ENTRY_BYTES, ByteLRU
from ctxproxy.config.models import TenantConfig
from ctxproxy.memory.cards import MemoryCard
from ctxproxy.memory.round_cards import RoundMemories, completed_rounds, extract_round, from_notes
from ctxproxy.memory.scopes import LayerKind, MemoryScope
from ctxproxy.memory.writer import MemoryWriter
from ctxproxy.session.digest import PrefixChain
from ctxproxy.strategies.base import Message
from ctxproxy.summarize.round_notes import llm_round_notes
from ctxproxy.upstream.completion import CompletionClient

__all__ = ["RoundMemory", "RoundRequest", "extracts"]

SeenKey = tuple[str, str, str | None, str | None, bytes]
MAX_ROUNDS_AT_ONCE = 8  # a long history seen for the first time: its newest rounds only


@dataclass(frozen=True)
class RoundRequest:
    """What of one request the extraction needs."""

    tenant: TenantConfig
    scope: MemoryScope
    messages: Sequence[Message]
    chain: PrefixChain  # of ``messages``
    session: str  # the session key's value: the cards' source, the log lines
    authorization: str | None  # the client's, for embeddings when the tenant has no key
    completions: CompletionClient  # the tenant's upstream in the request's protocol
    model: str  # the summary model


@dataclass(frozen=True)
class _Rounds:
    request: RoundRequest
    spans: tuple[tuple[int, int], ...]  # oldest first


def extracts(tenant: TenantConfig, user: str | None, scope: str | None) -> bool:
    """Whether a request of ``tenant`` naming ``user`` and ``scope`` has rounds to extract
    (``RoundMemory.after``): the pipeline builds no ``RoundRequest`` for one that has none."""
    memory = tenant.memory
    return memory.enabled and memory.layered and bool(user or scope)


class RoundMemory:
    def __init__(self, writer: MemoryWriter, tasks: BackgroundTasks, seen: ByteLRU[SeenKey, bool]) -> None:
        self._writer = writer
        self._tasks = tasks
        self._seen = seen

    def after(self, req: RoundRequest) -> int:
        """Start extracting the finished rounds of ``req`` not seen finished before (see the
        module docstring); how many."""
        scope = req.scope
        if not extracts(req.tenant, scope.user, scope.scope):
            return 0
        spans: list[tuple[int, int]] = []
        for start, end in completed_rounds(req.messages):
            key: SeenKey = (scope.tenant, scope.session, scope.user, scope.scope, req.chain.prefix_hash(end))
            if key in self._seen or len(spans) == MAX_ROUNDS_AT_ONCE:
                break
            self._seen.put(key, True, ENTRY_BYTES + sum(sys.getsizeof(part) for part in key))
            spans.append((start, end))
        if spans:
            self._tasks.spawn(self._remember(_Rounds(req, tuple(reversed(spans)))), name="memory.rounds")
        return len(spans)

    async def _remember(self, rounds: _Rounds) -> None:
        req = rounds.request
        memories = await _extracted(rounds)
        written: tuple[tuple[LayerKind, tuple[MemoryCard, ...]], ...] = (
            ("user", memories.user),
            ("scope", memories.scope),
        )
        for kind, docs in written:
            if req.scope.layer(kind) is not None:
                await self._writer.write(
                    req.tenant, req.scope, docs, authorization=req.authorization, session=req.session, to=(kind,)
                )


async def _extracted(rounds: _Rounds) -> RoundMemories:
    """The LLM's notes on the rounds (one call), else each round's deterministic extraction."""
    req, now = rounds.request, time.time()
    first, last = rounds.spans[0][0], rounds.spans[-1][1]
    if req.tenant.compaction.summarizer == "llm":
        notes = await llm_round_notes(req.completions, req.model, req.messages[first:last])
        if notes is not None:
            return from_notes(notes.user, notes.project, _source(req, first, last), now)
    found = [extract_round(req.messages[start:end], _source(req, start, end), now) for start, end in rounds.spans]
    return RoundMemories(
        tuple(card for one in found for card in one.user), tuple(card for one in found for card in one.scope)
    )


def _source(req: RoundRequest, start: int, end: int) -> str:
    return f"session {req.session}, messages {start + 1}-{end}"

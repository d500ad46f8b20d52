"""How the engine sees a session: its stored checkpoint index, and a request's conversation as
it would be forwarded with a given checkpoint (the summary message counted as its kind renders it,
and what any summary message costs besides its text, for the planners' estimates; what the tenant
optimises and its summary budget for the request's window), and what its branch summaries add to
the prompt."""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog

from ctxproxy.cache import ByteLRU, CachePool
from ctxproxy.compaction.assemble import branch_message, empty_summary_message, summary_messages
from ctxproxy.compaction.checkpoint_memo import CheckpointMemo
from ctxproxy.compaction.checkpoints import SessionIndex
from ctxproxy.compaction.index_memo import IndexMemo
from ctxproxy.compaction.inputs import CompactionInput
from ctxproxy.session import SessionKey, message_digest
from ctxproxy.store import JSONValue, Store, StoreError, warn_store_failure
from ctxproxy.store.keys import checkpoints_key
from ctxproxy.strategies.base import Checkpoint, Conversation, Message
from ctxproxy.strategies.kinds import BlockKinds
from ctxproxy.tokens import TokenCounter

log = structlog.get_logger(__name__)
# A session's summary counts held: the key, a weak reference, the placement, two counts, the tuples.
_SUMMARY_ENTRY_BYTES = 400


class SessionViews:
    def __init__(
        self, store: Store, counter: TokenCounter, kinds: BlockKinds, cache: ByteLRU[Hashable, Any] | None = None
    ) -> None:
        """``cache``: where what was read and decoded is kept between requests (the ``checkpoints``
        share: ``CheckpointMemo``, ``IndexMemo``, the summaries' token counts)."""
        self._store = store
        self._counter = counter
        self.kinds = kinds
        self._cache = cache if cache is not None else CachePool().lru("checkpoints")
        self._memo = CheckpointMemo(self._cache)
        self._indexes = IndexMemo(self._cache)

    async def load(self, key: SessionKey) -> SessionIndex:
        """The session's index, read at every call; an empty one when the store fails (logged)."""
        name = checkpoints_key(key)
        try:
            stored = await self._store.get_bytes(name)
        except StoreError as exc:
            warn_store_failure(log, exc, "checkpoint.load_failed", session=key.value, error=str(exc))
            return SessionIndex()
        return self._indexes.decoded(key.store_id, name, stored, lambda value: self._decode(key, value))

    def _decode(self, key: SessionKey, value: JSONValue | None) -> SessionIndex:
        index = SessionIndex.decode(value)
        return replace(index, checkpoints=self._memo.settled(key.store_id, index.checkpoints))

    def made(self, key: SessionKey, checkpoint: Checkpoint) -> None:
        """``checkpoint`` was saved for ``key``'s session: its next load may take it as it is."""
        self._memo.made(key.store_id, checkpoint)

    def conversation(
        self, req: CompactionInput, head: int, current: Checkpoint | None, prompt: int | None = None
    ) -> Conversation:
        """``req`` as seen with ``current`` (``prompt``: ``prompt_tokens(req.tokens)``, when known)."""
        config = req.tenant.compaction
        summary, overhead = self._summary_tokens(req, current)
        return Conversation(
            req.messages,
            req.tokens,
            head,
            req.window,
            summary,
            overhead,
            optimise=config.optimise,
            summary_budget=config.summary_budget(req.window.budget),
            system_at=req.system_at,
            prompt=prompt,
        )

    def branch_tokens(self, req: CompactionInput, branches: Sequence[Checkpoint]) -> int:
        """Tokens the messages of ``branches`` (branch summaries) add to ``req``'s prompt."""
        return sum(self._tokens(branch_message(branch, self.kinds), req.model) for branch in branches)

    def _summary_tokens(self, req: CompactionInput, current: Checkpoint | None) -> tuple[int, int]:
        """The tokens of ``current``'s summary messages (0 without one) and what a summary message
        costs besides its text, as ``req`` counts them: counted again only for another checkpoint
        object, placement or model than the session's previous request's."""
        placement = req.tenant.compaction.summary_placement
        key, asked = ("summary", req.key.store_id), (placement, req.model)
        # The checkpoint by a weak reference: an entry never keeps one alive the index let go.
        held = weakref.ref(current) if current is not None else None
        known: _Counted | None = self._cache.get(key)
        if known is not None and known.asked == asked and _same(known.checkpoint, current):
            return known.counts
        summary = 0
        if current is not None:
            summary = sum(self._tokens(m, req.model) for m in summary_messages(current, placement, self.kinds))
        counted = summary, self._tokens(empty_summary_message(placement, self.kinds), req.model)
        self._cache.put(key, _Counted(held, asked, counted), _SUMMARY_ENTRY_BYTES + len(req.model or ""))
        return counted

    def _tokens(self, message: Message, model: str | None) -> int:
        return self._counter.count_message(message, message_digest(message), model)


@dataclass(frozen=True)
class _Counted:
    """A session's summary counts (``SessionViews._summary_tokens``): for which checkpoint, and
    which placement and model."""

    checkpoint: weakref.ref[Checkpoint] | None
    asked: tuple[str, str | None]
    counts: tuple[int, int]


def _same(held: weakref.ref[Checkpoint] | None, current: Checkpoint | None) -> bool:
    return held is None if current is None else held is not None and held() is current

"""How the engine sees a session: its stored checkpoint index, and a request's conversation as
it would be forwarded with a given checkpoint (the summary message counted as its kind renders it,
and what any summary message costs besides its text, for the planners' estimates; what the tenant
optimises and its summary budget for the request's window), and what its branch summaries add to
the prompt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import structlog

from ctxproxy.compaction.assemble import branch_message, empty_summary_message, summary_messages
from ctxproxy.compaction.checkpoint_memo import CheckpointMemo
from ctxproxy.compaction.checkpoints import SessionIndex
from ctxproxy.compaction.inputs import CompactionInput
from ctxproxy.session import SessionKey, message_digest
from ctxproxy.store import Store, StoreError, warn_store_failure
from ctxproxy.store.keys import checkpoints_key
from ctxproxy.strategies.base import Checkpoint, Conversation, Message
from ctxproxy.strategies.kinds import BlockKinds
from ctxproxy.tokens import TokenCounter

log = structlog.get_logger(__name__)


class SessionViews:
    def __init__(
        self, store: Store, counter: TokenCounter, kinds: BlockKinds, memo: CheckpointMemo | None = None
    ) -> None:
        self._store = store
        self._counter = counter
        self.kinds = kinds
        self._memo = memo if memo is not None else CheckpointMemo()

    async def load(self, key: SessionKey) -> SessionIndex:
        """The session's index; an empty one when the store fails (logged)."""
        try:
            index = SessionIndex.decode(await self._store.get(checkpoints_key(key)))
        except StoreError as exc:
            warn_store_failure(log, exc, "checkpoint.load_failed", session=key.value, error=str(exc))
            return SessionIndex()
        return replace(index, checkpoints=self._memo.settled(key.store_id, index.checkpoints))

    def made(self, key: SessionKey, checkpoint: Checkpoint) -> None:
        """``checkpoint`` was saved for ``key``'s session: its next load may take it as it is."""
        self._memo.made(key.store_id, checkpoint)

    def conversation(self, req: CompactionInput, head: int, current: Checkpoint | None) -> Conversation:
        config = req.tenant.compaction
        placement = config.summary_placement
        summary = 0
        if current is not None:
            summary = sum(self._tokens(m, req.model) for m in summary_messages(current, placement, self.kinds))
        overhead = self._tokens(empty_summary_message(placement, self.kinds), req.model)
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
        )

    def branch_tokens(self, req: CompactionInput, branches: Sequence[Checkpoint]) -> int:
        """Tokens the messages of ``branches`` (branch summaries) add to ``req``'s prompt."""
        return sum(self._tokens(branch_message(branch, self.kinds), req.model) for branch in branches)

    def _tokens(self, message: Message, model: str | None) -> int:
        return self._counter.count_message(message, message_digest(message), model)

"""Executing a plan whose block kind brings its own executor (``BlockKind.executor``).

An executor gets the plan with the request's messages (``PlanJob``) and the engine's side of the
request (``ExecutionHost``): whatever it may read, call or write, bound to the request's tenant,
session, model and memory scope. Executors import no engine, server or tools code; the compaction
engine implements the host (``ctxproxy.compaction.keeper.RequestHost``). Planning stays pure:
only executors do I/O, and only through the host.

Two kinds have one: ``paged``'s archive step (``ctxproxy.strategies.paged.archive_io``) and the
branch summary (``ctxproxy.strategies.branch``). The host offers what they need beyond the Store:
one-line summaries of pages and summaries of an abandoned branch, made by the tenant's
summariser, and the memory documents that keep archived pages findable.

A kind may also bring a viewer (``BlockKind.viewer``): how a checkpoint of its kind is forwarded
in one request when that depends on more than its stored blocks — ``paged``'s Contents Page with
its recall statistics, and the pages the model recalled restored after it
(``ctxproxy.strategies.paged.restore_io``). It reads through the same host and returns a
``Shown``; the engine assembles it, and forwards the stored checkpoint when the viewer's Store
read fails.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ctxproxy.session import PrefixChain
from ctxproxy.strategies.base import Checkpoint, Conversation, Message, Plan, StrategyOptions

if TYPE_CHECKING:
    from ctxproxy.store.base import Store
    from ctxproxy.strategies.paged.archive import ArchivedPage
    from ctxproxy.strategies.paged.lines import PageLines


@dataclass(frozen=True)
class PlanJob:
    """``plan``, to execute over the request's ``messages`` (prefix chain ``chain``, ``head``
    leading system messages) on top of ``previous``, the checkpoint it was planned with."""

    plan: Plan
    messages: Sequence[Message]
    chain: PrefixChain
    head: int
    previous: Checkpoint | None
    now: float


class ExecutionHost(Protocol):
    """The engine's side of one request, lent to an executor."""

    @property
    def store(self) -> Store: ...

    @property
    def options(self) -> StrategyOptions:
        """The tenant's options of its strategy (the one whose plan is executed)."""
        ...

    def page_key(self, suffix: str) -> str:
        """The Store key of the session's archived page ``suffix``."""
        ...

    def recall_key(self) -> str:
        """The Store key of the recall statistics of the session's archived pages."""
        ...

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` for the request's model."""
        ...

    async def page_lines(self, pages: Sequence[Sequence[Message]]) -> tuple[list[PageLines], str]:
        """One line per page and per entry, by the tenant's summariser (its LLM, else extractive),
        and which of the two wrote them (``"llm"`` or ``"extractive"``)."""
        ...

    async def summarize_branch(self, messages: Sequence[Message], max_tokens: int) -> tuple[str, str]:
        """``messages``, a branch the conversation left, summarised within ``max_tokens`` by the
        tenant's summariser (its LLM with the extractive one as the fallback, or the extractive
        one): the summary's body and which of the two wrote it (``"llm"`` or ``"extractive"``)."""
        ...

    async def remember_pages(self, pages: Sequence[ArchivedPage], now: float) -> None:
        """Make archived pages findable by memory search; a failure is logged, never raised."""
        ...


PlanExecutor = Callable[[PlanJob, ExecutionHost], Awaitable[Checkpoint]]


@dataclass(frozen=True)
class Shown:
    """A checkpoint as one request forwards it: ``checkpoint`` with its blocks' text as shown now
    (never saved), and ``restored``: indices of the request's own messages forwarded again right
    after the summary message, in that order."""

    checkpoint: Checkpoint
    restored: tuple[int, ...] = ()


# (the request's conversation as seen with the checkpoint, the checkpoint, the host) → how it is
# shown; None: as it is stored.
CheckpointViewer = Callable[[Conversation, Checkpoint, ExecutionHost], Awaitable[Shown | None]]

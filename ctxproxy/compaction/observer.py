"""The port through which the compaction engine reports what it did, for whoever counts it
(the metrics, ``ctxproxy.metrics``); the engine knows nothing of how it is counted.

``kind`` says why a compaction ran: ``planned`` (the tenant's strategy asked for it),
``emergency`` (the prompt would not fit its window without it: the pre-flight cut) or
``recovery`` (the upstream refused the prompt as too long, and ctxproxy compacts harder before
its retry). A summary's time is reported with the summariser that made it.
"""

from __future__ import annotations

from typing import Literal, Protocol

CompactionKind = Literal["planned", "emergency", "recovery"]


class CompactionObserver(Protocol):
    def compacted(self, tenant: str, strategy: str, mode: str, kind: CompactionKind) -> None:
        """One compaction ran and made a checkpoint."""
        ...

    def summarized(self, tenant: str, summarizer: str, seconds: float) -> None:
        """Executing a compaction's plan (summarising, archiving) took ``seconds``."""
        ...


class Unobserved:
    """The observer of an engine nobody counts."""

    def compacted(self, tenant: str, strategy: str, mode: str, kind: CompactionKind) -> None:
        pass

    def summarized(self, tenant: str, summarizer: str, seconds: float) -> None:
        pass

"""Writing memory documents for a request: embedded first when the tenant fuses embeddings, then
added to the request's layers. Whoever writes — a compaction (``ctxproxy.compaction.keeper``),
a finished round (``ctxproxy.memory.after_round``) — a failing store or embeddings call is
logged and never fails what wrote them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import structlog

from ctxproxy.config.models import TenantConfig
from ctxproxy.memory.cards import MemoryCard
from ctxproxy.memory.embeddings import embed
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import LayerKind, MemoryScope
from ctxproxy.store import StoreError, warn_store_failure
from ctxproxy.upstream.client import UpstreamHttp

__all__ = ["MemoryWriter"]

log = structlog.get_logger(__name__)


class MemoryWriter:
    def __init__(self, memories: MemoryStore, http: UpstreamHttp) -> None:
        self._memories = memories
        self._http = http

    async def write(
        self,
        tenant: TenantConfig,
        scope: MemoryScope,
        docs: Sequence[MemoryCard],
        *,
        authorization: str | None,
        session: str,
        to: Sequence[LayerKind] | None = None,
    ) -> None:
        """Write ``docs`` to their layers (``MemoryStore.add``; ``to``: those kinds of layer);
        ``authorization``: the client's, for the embeddings call when the tenant has no key;
        ``session``: the session key, for the log line of a failure."""
        if not docs:
            return
        memory = tenant.memory
        try:
            if memory.embeddings_model:
                vectors = await embed(
                    self._http,
                    tenant.upstream,
                    memory.embeddings_model,
                    [d.content for d in docs],
                    authorization,
                    memory.embeddings_timeout,
                )
                if vectors is not None:
                    docs = [replace(d, vector=tuple(v)) for d, v in zip(docs, vectors, strict=True)]
            await self._memories.add(scope, docs, to=to)
        except StoreError as exc:
            warn_store_failure(log, exc, "memory.write_failed", session=session, error=str(exc))

"""What the inspector and the admin API read from the Store about a tenant and its sessions.

Reads only; every key comes from ``ctxproxy.store.keys``. A value that is missing or malformed
reads as nothing (an empty list, ``None``), never as an error.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from ctxproxy.compaction.checkpoints import decode_index
from ctxproxy.inspector.charts import Slot
from ctxproxy.memory import layer_values
from ctxproxy.memory.cards import MemoryCard
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.session.forget import session_memory_layers
from ctxproxy.session.identity import SessionKey
from ctxproxy.session.records import history_entries, record_names
from ctxproxy.session.tenant_stats import BUCKET_SECONDS, Totals, decode, totals
from ctxproxy.store import Store
from ctxproxy.store.keys import (
    checkpoints_key,
    page_recalls_key,
    session_history_key,
    session_record_key,
    session_records_prefix,
    tenant_stats_prefix,
)
from ctxproxy.strategies.kinds import BlockKinds
from ctxproxy.strategies.paged.contents import decode_entries, decode_stats, page_stats

HOUR, DAY = 3600, 86400


async def session_records(store: Store, tenant: str) -> list[dict[str, Any]]:
    """The tenant's session records, newest first."""
    names = await store.keys(session_records_prefix(tenant))
    values = await asyncio.gather(*(store.get(name) for name in names))
    records = [value for value in values if isinstance(value, dict)]
    records.sort(key=lambda r: -_number(r.get("last_seen")))
    return records


async def tenant_sessions(store: Store, tenant: str) -> int:
    """How many sessions the tenant has a record of (one key scan, no reads)."""
    return len(await store.keys(session_records_prefix(tenant)))


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


async def session_record(store: Store, key: SessionKey) -> dict[str, Any] | None:
    value = await store.get(session_record_key(key))
    return value if isinstance(value, dict) else None


async def session_history(store: Store, key: SessionKey) -> list[dict[str, Any]]:
    """The session's recorded requests, oldest first (``session.records``)."""
    return history_entries(await store.get(session_history_key(key)))


async def session_detail(store: Store, kinds: BlockKinds, key: SessionKey) -> dict[str, Any] | None:
    """The session's checkpoints (each with its summary as the model reads it), the Contents
    Page of the newest one and its archived pages with their recall counts; None without a
    checkpoint."""
    checkpoints = decode_index(await store.get(checkpoints_key(key)))
    if not checkpoints:
        return None
    newest = max(checkpoints, key=lambda c: c.end)
    entries = decode_entries(newest.state)
    stats = page_stats(decode_stats(await store.get(page_recalls_key(key))), [(e.page, e.key) for e in entries])
    contents = kinds.recall_blocks(newest.blocks)
    pages = [
        {
            "page": e.page,
            "messages": [e.start, e.end],
            "summary": e.summary,
            "evicted": e.evicted,
            "recalls": stats[e.page].count if e.page in stats else 0,
            "last_recall_turn": stats[e.page].last_turn if e.page in stats else None,
        }
        for e in (entries if contents else [])
    ]
    return {
        "session": key.value,
        "source": key.source,
        "checkpoints": [
            {
                "end": c.end,
                "prefix_hash": c.prefix_hash,
                "created_at": c.created_at,
                "summarizer": c.summarizer,
                "blocks": [{"start": b.start, "end": b.end, "kind": b.kind} for b in c.blocks],
                "summary": kinds.render(c.blocks),
            }
            for c in sorted(checkpoints, key=lambda c: c.end)
        ],
        "contents_page": kinds.render(contents) if contents else None,
        "pages": pages,
    }


@dataclass(frozen=True)
class Usage:
    """A tenant's traffic over the last hour and day, and per hour of the day for a chart."""

    hour: Totals
    day: Totals
    hours: list[Slot]


async def tenant_usage(store: Store, tenant: str, now: float | None = None) -> Usage:
    now = time.time() if now is None else now
    prefix = tenant_stats_prefix(tenant)
    starts = [(name, int(name[len(prefix) :])) for name in await store.keys(prefix) if name[len(prefix) :].isdecimal()]
    recent = [(name, start) for name, start in starts if start > now - DAY - BUCKET_SECONDS]
    values = await asyncio.gather(*(store.get(name) for name, _ in recent))
    buckets = [(start, value) for (_, start), value in zip(recent, values, strict=True)]
    per_hour = [Totals() for _ in range(24)]  # [0]: 23 to 24 hours ago, [23]: the last hour
    for start, value in buckets:
        ago = int((now - start) // HOUR)
        if 0 <= ago < 24:
            per_hour[23 - ago] += decode(value)
    hours = [
        Slot(time.strftime("%d %b %H:%M UTC", time.gmtime(now - (23 - i) * HOUR)), t.before, t.after)
        for i, t in enumerate(per_hour)
    ]
    return Usage(totals(buckets, now - HOUR), totals(buckets, now - DAY), hours)


@dataclass(frozen=True)
class MemoryRow:
    doc: MemoryCard
    owner: str  # whose layer of the session: a user, a scope, or "" (requests without either)
    score: float | None = None


async def session_memories(
    store: Store, memories: MemoryStore, key: SessionKey, record: Any, query: str = "", limit: int = 100
) -> list[MemoryRow]:
    """The memory cards in the session's layers (of the users and scopes its record names, and
    of requests without either), newest first; with ``query``, the best matches first."""
    users, scopes = record_names(record, "users"), record_names(record, "scopes")
    owners = [*users, "", *(f"scope {s}" for s in scopes), "anonymous"]
    layers = session_memory_layers(key, users, scopes)
    values = await asyncio.gather(*(store.get(layer) for layer in layers))
    owner_of: dict[str, str] = {}
    view: list[tuple[str, list[MemoryCard]]] = []
    for owner, value in zip(owners, values, strict=True):
        docs = layer_values.cards(value)
        view.append((owner, docs))
        for doc in docs:
            owner_of.setdefault(doc.id, owner)
    if query.strip():
        hits = memories.search_view([("session", docs) for _, docs in view], query, limit)
        return [MemoryRow(hit.doc, owner_of.get(hit.doc.id, ""), hit.score) for hit in hits]
    unique = {doc.id: doc for _, docs in view for doc in docs}
    newest = sorted(unique.values(), key=lambda d: -d.created_at)[:limit]
    return [MemoryRow(doc, owner_of[doc.id]) for doc in newest]

"""ctxproxy's own ``compaction`` items, expanded before a request goes anywhere.

A ``compaction`` item whose content ctxproxy issued (``compaction_store.is_ours``) stands for a
summary only ctxproxy holds: no upstream can read it. Wherever one is in ``input``, it is replaced
by a user message (:func:`summary_message`) carrying the summary under :data:`INTRO`, before the
request is parsed, served or forwarded, and whatever the tenant's ``responses_compaction``; a
summary that is gone becomes :data:`GONE_NOTE`. A user message: the item stands at the end of the
kept user messages, where the model must go on from it, and a developer message there would read
as an instruction. A ``compaction`` item the upstream issued is left as it is. Each session's
summaries are read from the store once a request, and a request's items may name at most
:data:`MAX_SESSIONS` sessions (one is what a client sends back): however many items a hostile
body holds, the store is asked a few times.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ctxproxy.session import SessionKey
from ctxproxy.wire.openai_responses.compaction_store import (
    GONE,
    CompactionRef,
    ServedSummaries,
    is_ours,
    summary_of,
)
from ctxproxy.wire.openai_responses.items import COMPACTION

__all__ = ["GONE_NOTE", "INTRO", "MAX_SESSIONS", "expand_compactions", "summary_message"]

MAX_SESSIONS: Final = 4  # sessions whose summaries one request may read: items naming more are notes
INTRO: Final = "[The earlier part of this conversation was compacted. This is its summary:]"
GONE_NOTE: Final = (
    "[The earlier part of this conversation was compacted, and its summary is no longer available "
    "(it expired or was deleted). Ask the user for what you need of it.]"
)


def _ours(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == COMPACTION and is_ours(item.get("encrypted_content"))


def summary_message(summary: str | object) -> dict[str, Any]:
    """The user message a compaction item of ctxproxy's becomes."""
    text = f"{INTRO}\n\n{summary}" if isinstance(summary, str) else GONE_NOTE
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


async def expand_compactions(
    summaries: ServedSummaries, tenant: str, body: dict[str, Any]
) -> tuple[dict[str, Any], int, int] | None:
    """``body`` with every compaction item of ctxproxy's expanded, how many, and how many of them
    had no summary left; None when it has none."""
    items = body.get("input")
    if not isinstance(items, list) or not any(_ours(item) for item in items):
        return None
    out: list[Any] = []
    expanded = gone = 0
    sessions: dict[SessionKey, Mapping[str, Any]] = {}  # each session's summaries, read once
    for item in items:
        if not _ours(item):
            out.append(item)
            continue
        ref = CompactionRef.parse(tenant, item["encrypted_content"])
        summary: str | object = GONE
        if ref is not None and (ref.key in sessions or len(sessions) < MAX_SESSIONS):
            if ref.key not in sessions:
                sessions[ref.key] = await summaries.session(ref.key)
            summary = summary_of(sessions[ref.key], ref.ident)
        expanded += 1
        gone += summary is GONE
        out.append(summary_message(summary))
    return {**body, "input": out}, expanded, gone

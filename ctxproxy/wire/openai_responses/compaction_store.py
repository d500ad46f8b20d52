"""The summaries behind the ``compaction`` items ctxproxy issues, and the items' opaque content.

When ctxproxy serves the Responses API's remote compaction (``compaction_serve``), the client gets
a ``compaction`` item whose ``encrypted_content`` is not encrypted at all but a reference,
:data:`PREFIX` + ``{id}:{s}:{session}``: a random 128-bit id, and the session (its key's source
letter and value, as ``X-Ctx-Session`` shows it) under which the summary is stored
(``store.keys.served_compactions_key``, in the request's tenant). The id is unguessable; the
tenant comes from the request, never from the content, so no client reaches another tenant's
summaries; the session in the content lets the item find its summary even when a later request's
conversation no longer names the same session (Codex starts a new context window after a
compaction).

The session's entry keeps its newest :data:`KEPT` summaries for ``session_ttl_days`` after the
last one was written, like the session's record, and goes with the session when it is deleted
(``session.forget``). A summary that is gone (expired, deleted, a store that is down) is
:data:`GONE`: the item it stood for is expanded into a note saying so, never forwarded (no
upstream can read ctxproxy's content).
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import structlog

from ctxproxy.session import SessionKey
from ctxproxy.store import JSONValue, Store, StoreError
from ctxproxy.store.keys import served_compactions_key

__all__ = ["GONE", "KEPT", "PREFIX", "CompactionRef", "ServedSummaries", "is_ours", "summary_of"]

log = structlog.get_logger(__name__)

PREFIX: Final = "ctxproxy:"
KEPT: Final = 8
GONE: Final = object()
_ID = re.compile(r"^[0-9a-f]{32}$")
_SESSION_VALUE = re.compile(r"^[A-Za-z0-9._:@-]{1,128}$")
_SOURCES: Final[dict[str, Literal["header", "derived"]]] = {"h": "header", "d": "derived"}


def is_ours(content: object) -> bool:
    """Whether a compaction item's ``encrypted_content`` is one ctxproxy issued (or pretends to be)."""
    return isinstance(content, str) and content.startswith(PREFIX)


@dataclass(frozen=True)
class CompactionRef:
    """Which stored summary a ``compaction`` item of ctxproxy's stands for."""

    key: SessionKey
    ident: str

    @classmethod
    def new(cls, key: SessionKey) -> CompactionRef:
        return cls(key, secrets.token_hex(16))

    @property
    def content(self) -> str:
        return f"{PREFIX}{self.ident}:{self.key.source[0]}:{self.key.value}"

    @classmethod
    def parse(cls, tenant: str, content: str) -> CompactionRef | None:
        """The reference in ``content`` (an item of ``tenant``'s client); None when it is malformed."""
        ident, _, rest = content.removeprefix(PREFIX).partition(":")
        source, _, value = rest.partition(":")
        if not _ID.match(ident) or source not in _SOURCES or not _SESSION_VALUE.match(value):
            return None
        return cls(SessionKey(tenant, value, _SOURCES[source]), ident)


class ServedSummaries:
    """The tenant's stored summaries, read and written through ``store``."""

    def __init__(self, store: Store, ttl: float) -> None:
        self._store = store
        self._ttl = ttl

    async def save(self, ref: CompactionRef, summary: str) -> bool:
        """Keep ``summary`` for ``ref``; False when the store could not (logged)."""
        entry = {"summary": summary, "at": time.time()}

        def add(current: JSONValue | None) -> JSONValue:
            kept = dict(current) if isinstance(current, Mapping) else {}
            kept[ref.ident] = entry
            newest = sorted(kept.items(), key=lambda pair: _at(pair[1]), reverse=True)[:KEPT]
            return dict(newest)

        try:
            await self._store.update(served_compactions_key(ref.key), add, ttl=self._ttl)
        except StoreError as exc:
            log.warning("responses.compaction_not_saved", session=ref.key.value, error=type(exc).__name__)
            return False
        return True

    async def load(self, ref: CompactionRef) -> str | object:
        """The summary ``ref`` stands for, or :data:`GONE`."""
        return summary_of(await self.session(ref.key), ref.ident)

    async def session(self, key: SessionKey) -> Mapping[str, Any]:
        """The session's stored summaries by id (none when the store cannot say: logged)."""
        try:
            stored = await self._store.get(served_compactions_key(key))
        except StoreError as exc:
            log.warning("responses.compaction_unreadable", session=key.value, error=type(exc).__name__)
            return {}
        return stored if isinstance(stored, Mapping) else {}


def summary_of(stored: Mapping[str, Any], ident: str) -> str | object:
    """The summary of id ``ident`` among a session's ``stored`` ones, or :data:`GONE`."""
    entry = stored.get(ident)
    summary = entry.get("summary") if isinstance(entry, Mapping) else None
    return summary if isinstance(summary, str) else GONE


def _at(entry: Any) -> float:
    at = entry.get("at") if isinstance(entry, Mapping) else None
    return float(at) if isinstance(at, (int, float)) else 0.0

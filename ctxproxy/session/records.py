"""What the Store keeps about a session's traffic: its record and its recent requests. Pure.

* The **record** (``store.keys.session_record_key``): when the session was first and last seen,
  how many requests, its newest size and model, and the names (users, scopes) its requests gave,
  the newest ``MAX_NAMES`` of each (the inspector shows them; deleting a session finds the
  memory layers of its scopes through them).
* The **history** (``store.keys.session_history_key``): per request, when it ended, the tokens
  the client sent (``before``) and forwarded (``after``), whether it made a checkpoint and
  whether it was retried after an overflow; the newest ``MAX_HISTORY`` requests.

An observation also carries what the request's prompt cost with the provider's prompt cache, as
sent and as forwarded (``ctxproxy.pipeline.pricing``), which the tenant's buckets sum
(``session.tenant_stats``).

``touch`` and ``appended`` are the pure updates applied atomically by ``Store.update_many``;
they never read the clock or the store themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ctxproxy.session.identity import SessionKey

MAX_HISTORY: Final = 200
MAX_NAMES: Final = 16


@dataclass(frozen=True)
class Observation:
    """One request of a session, as it ended."""

    at: float
    messages: int
    tokens: int  # the prompt as the client sent it
    head: str  # hex chain hash of the whole request
    model: str | None
    forwarded: int | None = None  # the prompt as forwarded (None: the request ended before that)
    compacted: bool = False
    retried: bool = False
    user: str | None = None
    scope: str | None = None
    billed: tuple[int, int] | None = None  # the prompt in full-price tokens, cache priced: as sent, as forwarded
    nano_usd: tuple[int, int] | None = None  # the same in billionths of a dollar, for a priced model

    def entry(self) -> dict[str, Any]:
        """The request's line of the session's history."""
        after = self.tokens if self.forwarded is None else self.forwarded
        return {
            "at": self.at,
            "before": self.tokens,
            "after": after,
            "compacted": self.compacted,
            "retried": self.retried,
        }


def touch(
    record: Any, key: SessionKey, seen: Observation, requests: int = 1, names: Iterable[Observation] = ()
) -> dict[str, Any]:
    """Count ``requests`` more requests; describe the session by its newest request; add the
    users and scopes of ``seen`` and ``names`` (requests of the same batch).

    Records are written in the background, so two requests' updates may land out of order:
    an older observation still counts, but never replaces what a newer one described.
    """
    previous = record if isinstance(record, dict) else {}
    newest = seen.at >= previous.get("last_seen", float("-inf"))
    latest = (
        {"last_seen": seen.at, "messages": seen.messages, "tokens": seen.tokens, "head": seen.head, "model": seen.model}
        if newest
        else {k: previous.get(k) for k in ("last_seen", "messages", "tokens", "head", "model")}
    )
    batch = [*names, seen]
    users = _names(previous.get("users"), [o.user for o in batch])
    scopes = _names(previous.get("scopes"), [o.scope for o in batch])
    return {
        "session": key.value,
        "source": key.source,
        "created_at": min(seen.at, previous.get("created_at", seen.at)),
        "requests": int(previous.get("requests", 0)) + requests,
        **latest,
        **({"users": users} if users else {}),
        **({"scopes": scopes} if scopes else {}),
    }


def record_names(record: Any, field: str) -> list[str]:
    """The users (``field="users"``) or scopes a stored record names; nothing from a malformed one."""
    found = record.get(field) if isinstance(record, dict) else None
    return [name for name in found if isinstance(name, str)] if isinstance(found, list) else []


def _names(previous: Any, seen: Sequence[str | None]) -> list[str]:
    """The newest ``MAX_NAMES`` distinct names, oldest first."""
    names = record_names({"n": previous}, "n")
    for name in seen:
        if name:
            if name in names:
                names.remove(name)
            names.append(name)
    return names[-MAX_NAMES:]


def appended(history: Any, entries: Iterable[dict[str, Any]], limit: int = MAX_HISTORY) -> list[dict[str, Any]]:
    """The stored history with ``entries`` added, in time order, the newest ``limit`` kept."""
    kept = history_entries(history)
    merged = sorted([*kept, *entries], key=lambda e: e["at"])
    return merged[-limit:]


def history_entries(value: Any) -> list[dict[str, Any]]:
    """The well-formed entries of a stored history, in time order; nothing from a malformed one."""
    if not isinstance(value, list):
        return []
    good = [
        e
        for e in value
        if isinstance(e, dict)
        and all(isinstance(e.get(k), int | float) and not isinstance(e.get(k), bool) for k in ("at", "before", "after"))
    ]
    return sorted(
        (
            {
                "at": float(e["at"]),
                "before": int(e["before"]),
                "after": int(e["after"]),
                "compacted": e.get("compacted") is True,
                "retried": e.get("retried") is True,
            }
            for e in good
        ),
        key=lambda e: e["at"],
    )

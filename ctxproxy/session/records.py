"""What the Store keeps about a session's traffic: its record and its recent requests. Pure.

* The **record** (``store.keys.session_record_key``): when the session was first and last seen,
  how many requests, its newest size, model and protocol (the path its client posts to:
  ``/v1/chat/completions``, ``/v1/messages``), and the names (users, scopes) its requests gave,
  the newest ``MAX_NAMES`` of each (the inspector shows them; deleting a session finds the
  memory layers of its scopes through them).
* The **history** (``store.keys.session_history_key``): per request, when it ended, the tokens
  the client sent (``before``) and forwarded (``after``), whether it made a checkpoint (and why:
  ``kind``, one of ``COMPACTION_KINDS``) and whether it was retried after an overflow; the newest
  ``MAX_HISTORY`` requests.

An observation also carries what the request's prompt cost with the provider's prompt cache, as
sent and as forwarded (``ctxproxy.pipeline.pricing``), which the tenant's buckets sum
(``session.tenant_stats``).

``touch`` and ``appended`` are the pure updates applied atomically by ``Store.update_many``;
they never read the clock or the store themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

from ctxproxy.session.identity import SessionKey

MAX_HISTORY: Final = 200
MAX_NAMES: Final = 16
# Why a request compacted (``ctxproxy.compaction.observer``): its strategy planned it, the prompt
# did not fit without it (pre-flight), or the upstream refused the prompt as too long (the retry's).
COMPACTION_KINDS: Final = ("planned", "emergency", "recovery")


class Observation(NamedTuple):
    """One request of a session, as it ended (a NamedTuple: made at every request, three times
    cheaper than a frozen dataclass of as many fields, and as immutable)."""

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
    protocol: str | None = None  # the path the client posted to
    kind: str | None = None  # why it compacted (one of COMPACTION_KINDS), when it did
    reached_upstream: bool = True  # False: ctxproxy answered it with an error of its own, never forwarded
    billed: tuple[int, int] | None = None  # the prompt in full-price tokens, cache priced: as sent, as forwarded
    nano_usd: tuple[int, int] | None = None  # the same in billionths of a dollar, for a priced model

    def entry(self) -> dict[str, Any]:
        """The request's line of the session's history."""
        after = self.tokens if self.forwarded is None else self.forwarded
        line: dict[str, Any] = {
            "at": self.at,
            "before": self.tokens,
            "after": after,
            "compacted": self.compacted,
            "retried": self.retried,
        }
        if self.compacted and self.kind in COMPACTION_KINDS:
            line["kind"] = self.kind
        return line


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
    described = ("last_seen", "messages", "tokens", "head", "model", "protocol")
    latest = (
        {
            "last_seen": seen.at,
            "messages": seen.messages,
            "tokens": seen.tokens,
            "head": seen.head,
            "model": seen.model,
            "protocol": seen.protocol,
        }
        if newest
        else {k: previous.get(k) for k in described}
    )
    if latest["protocol"] is None:
        del latest["protocol"]  # not known (a record written before it was kept)
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
    return sorted((_entry(e) for e in good), key=lambda e: e["at"])


def _entry(e: dict[str, Any]) -> dict[str, Any]:
    compacted = e.get("compacted") is True
    line: dict[str, Any] = {
        "at": float(e["at"]),
        "before": int(e["before"]),
        "after": int(e["after"]),
        "compacted": compacted,
        "retried": e.get("retried") is True,
    }
    if compacted and e.get("kind") in COMPACTION_KINDS:
        line["kind"] = e["kind"]
    return line

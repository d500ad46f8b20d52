"""The answers ctxproxy gives when it serves a remote compaction itself, in the API's shapes (pure).

* To a ``POST /v1/responses`` whose last input item is ``compaction_trigger`` (Codex's
  ``remote_compaction_v2``): a response whose ``output`` is exactly one ``compaction`` item, as a
  JSON response object or, when the request streams, as ``response.created``,
  ``response.in_progress``, ``response.output_item.added`` / ``.done`` and ``response.completed``
  (the SDK's ``ResponseStreamEvent`` types, numbered by ``sequence_number``).
* To ``POST /v1/responses/compact``: the compacted-response object (``object:
  "response.compaction"``), whose ``output`` is every user message of the input as the client
  sent it, then the one ``compaction`` item (the SDK's ``CompactedResponse``).

``usage``: the conversation's tokens by ctxproxy's count as ``input_tokens``, the summary's as
``output_tokens``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxproxy.wire.openai_responses.stream import event_bytes

__all__ = ["ServedCompaction", "compacted_response", "response_events", "response_object"]


@dataclass(frozen=True)
class ServedCompaction:
    """One compaction ctxproxy made: its item's id and content, and what it cost."""

    ident: str
    content: str  # the item's ``encrypted_content``
    input_tokens: int
    output_tokens: int
    created_at: int = 0

    @property
    def item(self) -> dict[str, Any]:
        return {"type": "compaction", "id": f"cmp_{self.ident}", "encrypted_content": self.content}

    @property
    def usage(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.input_tokens + self.output_tokens,
        }

    @property
    def created(self) -> int:
        return self.created_at or int(time.time())


def response_object(body: Mapping[str, Any], served: ServedCompaction, *, done: bool = True) -> dict[str, Any]:
    """The response to a trigger request (``body``); ``done``: complete, else as it starts."""
    return {
        "id": f"resp_{served.ident}",
        "object": "response",
        "created_at": served.created,
        "status": "completed" if done else "in_progress",
        "model": body.get("model"),
        "output": [served.item] if done else [],
        "usage": served.usage if done else None,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "tools": body.get("tools") or [],
        "tool_choice": body.get("tool_choice") or "auto",
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "store": body.get("store", True),
        "metadata": body.get("metadata") or {},
        "reasoning": body.get("reasoning"),
        "text": body.get("text") or {"format": {"type": "text"}},
        "truncation": body.get("truncation") or "disabled",
        "previous_response_id": None,
    }


def response_events(body: Mapping[str, Any], served: ServedCompaction) -> bytes:
    """The same response as an event stream."""
    opening = response_object(body, served, done=False)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": opening},
        {"type": "response.in_progress", "response": opening},
        {"type": "response.output_item.added", "output_index": 0, "item": served.item},
        {"type": "response.output_item.done", "output_index": 0, "item": served.item},
        {"type": "response.completed", "response": response_object(body, served)},
    ]
    return b"".join(event_bytes({**event, "sequence_number": n}) for n, event in enumerate(events))


def compacted_response(items: Sequence[Any], served: ServedCompaction) -> dict[str, Any]:
    """The answer to ``POST /v1/responses/compact``: the input's user messages, then the item."""
    users = [
        i for i in items if isinstance(i, Mapping) and i.get("role") == "user" and i.get("type", "message") == "message"
    ]
    return {
        "id": f"resp_{served.ident}",
        "object": "response.compaction",
        "created_at": served.created,
        "output": [*users, served.item],
        "usage": served.usage,
    }

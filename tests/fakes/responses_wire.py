"""How the fake Responses upstream writes its answers (pure): the response object and its events.

A response's ``output`` is a list of items: a ``reasoning`` item (with ``encrypted_content`` and a
summary), an assistant ``message`` (one ``output_text`` part), ``function_call`` items, or a
``compaction`` item. Streamed, as api.openai.com streams it
(https://platform.openai.com/docs/api-reference/responses-streaming): ``response.created``,
``response.in_progress``, per item ``response.output_item.added``, its part or argument events,
``response.output_item.done``, then ``response.completed`` carrying the whole response with
``usage``; every event has a ``sequence_number``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Answer",
    "compaction_content",
    "encrypted_reasoning",
    "openai_error",
    "response_events",
    "response_object",
    "sse_bytes",
]

SseEvent = dict[str, Any]


@dataclass
class Answer:
    """What the fake model says to one request: its output items and usage."""

    model: str
    number: int
    output: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    text_pieces: list[str] | None = None  # how the message's text is streamed (None: one delta)

    @property
    def id(self) -> str:
        return f"resp_fake{self.number:04d}"

    def add_text(self, text: str) -> None:
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        item = {"type": "message", "id": f"msg_fake{self.number:04d}", "status": "completed", "role": "assistant"}
        self.output.append({**item, "content": [part]})

    def add_call(self, name: str, arguments: str, call_id: str) -> None:
        index = len(self.output)
        item_id = f"fc_fake{self.number:04d}_{index}"
        self.output.append(
            {
                "type": "function_call",
                "id": item_id,
                "call_id": call_id,
                "name": name,
                "arguments": arguments,
                "status": "completed",
            }  # fmt: skip
        )

    def add_reasoning(self, summary: str) -> None:
        item_id = f"rs_fake{self.number:04d}_{len(self.output)}"
        self.output.append(
            {
                "type": "reasoning",
                "id": item_id,
                "summary": [{"type": "summary_text", "text": summary}],
                "encrypted_content": encrypted_reasoning(item_id),
            }  # fmt: skip
        )

    def add_compaction(self) -> None:
        item_id = f"cmp_fake{self.number:04d}"
        self.output.append({"type": "compaction", "id": item_id, "encrypted_content": compaction_content(self.number)})


def encrypted_reasoning(item_id: str) -> str:
    """The opaque content of a reasoning item: long, base64, and checked when it comes back."""
    return base64.b64encode((f"reasoning of {item_id};" * 40).encode()).decode()


def compaction_content(number: int) -> str:
    return base64.b64encode(f"fake compaction {number}".encode()).decode()


def openai_error(message: str, *, kind: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None) -> dict[str, Any]:  # fmt: skip
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def response_object(answer: Answer, body: dict[str, Any], *, done: bool = True) -> dict[str, Any]:
    return {
        "id": answer.id,
        "object": "response",
        "created_at": 1_760_000_000 + answer.number,
        "status": "completed" if done else "in_progress",
        "model": answer.model,
        "output": answer.output if done else [],
        "usage": answer.usage if done else None,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "tools": body.get("tools") or [],
        "tool_choice": body.get("tool_choice") or "auto",
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "store": body.get("store", True),
        "metadata": {},
        "text": {"format": {"type": "text"}},
        "reasoning": body.get("reasoning"),
        "temperature": 1.0,
        "top_p": 1.0,
        "truncation": "disabled",
        "previous_response_id": body.get("previous_response_id"),
    }


def _item_events(item: dict[str, Any], index: int, pieces: list[str] | None) -> list[SseEvent]:
    """The events between an output item's ``added`` and its ``done``."""
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "function_call":
        return [
            {"type": "response.function_call_arguments.delta", **where, "delta": item["arguments"]},
            {
                "type": "response.function_call_arguments.done",
                **where,
                "arguments": item["arguments"],
                "name": item["name"],
            },  # fmt: skip
        ]
    if item["type"] != "message":
        return []
    part = item["content"][0]
    at = {**where, "content_index": 0}
    deltas = pieces if pieces is not None else [part["text"]]
    return [
        {"type": "response.content_part.added", **at, "part": {**part, "text": ""}},
        *({"type": "response.output_text.delta", **at, "delta": piece, "logprobs": []} for piece in deltas),
        {"type": "response.output_text.done", **at, "text": part["text"], "logprobs": []},
        {"type": "response.content_part.done", **at, "part": part},
    ]


def _opening_item(item: dict[str, Any]) -> dict[str, Any]:
    adding = dict(item)
    if "status" in item:
        adding["status"] = "in_progress"
    if item["type"] == "function_call":
        adding["arguments"] = ""
    elif item["type"] == "message":
        adding["content"] = []
    return adding


def response_events(answer: Answer, body: dict[str, Any], *, opening_only: bool = False) -> list[SseEvent]:
    """The stream of ``answer``; ``opening_only``: its first two events alone."""
    opening = response_object(answer, body, done=False)
    events: list[SseEvent] = [
        {"type": "response.created", "response": opening},
        {"type": "response.in_progress", "response": opening},
    ]
    if not opening_only:
        for index, item in enumerate(answer.output):
            events.append({"type": "response.output_item.added", "output_index": index, "item": _opening_item(item)})
            events += _item_events(item, index, answer.text_pieces)
            events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        events.append({"type": "response.completed", "response": response_object(answer, body)})
    return numbered(events)


def numbered(events: list[SseEvent], start: int = 0) -> list[SseEvent]:
    return [{**event, "sequence_number": start + n} for n, event in enumerate(events)]


def sse_bytes(event: SseEvent) -> bytes:
    if "raw" in event:
        return bytes(event["raw"])
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()

"""Reading a Messages stream (https://docs.claude.com/en/docs/build-with-claude/streaming).

Every event has a name and JSON data whose ``type`` repeats the name::

    event: message_start          {"type": "message_start", "message": {... "usage": {...}}}
    event: content_block_start    {"type": "content_block_start", "index": 0, "content_block": {...}}
    event: ping                   {"type": "ping"}
    event: content_block_delta    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", ...}}
    event: content_block_stop     {"type": "content_block_stop", "index": 0}
    event: message_delta          {"type": "message_delta", "delta": {"stop_reason": ...}, "usage": {...}}
    event: message_stop           {"type": "message_stop"}
    event: error                  {"type": "error", "error": {"type": "overloaded_error", "message": ...}}

A stream is complete when ``message_stop`` arrived; one that ends before it was cut short (an
``error`` event says why, when the upstream sent one). Unknown events are allowed ("your code
should handle unknown event types gracefully") and ignored here.

Usage: ``message_start`` carries ``input_tokens``, ``cache_creation_input_tokens``,
``cache_read_input_tokens`` and a first ``output_tokens``; each ``message_delta`` carries the
cumulative ``output_tokens`` and may carry cumulative input counts again, which then replace the
earlier ones (a count it leaves out keeps its ``message_start`` value). ``input_tokens`` excludes
the tokens read from or written to the prompt cache, so the prompt's size is the sum of the three
(:attr:`Usage.prompt_tokens`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson

__all__ = ["StreamError", "StreamEvent", "StreamState", "Usage", "error_of", "parse_events", "usage_of"]

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE_END = re.compile(rb"\r\n|\n|\r")
_USAGE_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


@dataclass(frozen=True)
class StreamEvent:
    """One event: its ``event:`` name (None when it had none) and its ``data:`` lines joined."""

    name: str | None
    data: bytes

    def payload(self) -> dict[str, Any] | None:
        """The data as a JSON object, or None when it is not one."""
        try:
            value = orjson.loads(self.data)
        except orjson.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    @property
    def kind(self) -> str | None:
        """The event's type: its name, else its data's ``type``."""
        if self.name is not None:
            return self.name
        payload = self.payload()
        kind = payload.get("type") if payload is not None else None
        return kind if isinstance(kind, str) else None


@dataclass(frozen=True)
class StreamError:
    """An ``error`` event: Anthropic's error type (``overloaded_error``, ...) and its message."""

    type: str
    message: str


@dataclass(frozen=True)
class Usage:
    input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    output_tokens: int | None = None

    @property
    def prompt_tokens(self) -> int | None:
        """The whole prompt: input plus cache writes plus cache reads (None without input_tokens)."""
        if self.input_tokens is None:
            return None
        return self.input_tokens + (self.cache_creation_input_tokens or 0) + (self.cache_read_input_tokens or 0)

    def updated(self, newer: Usage) -> Usage:
        """These counts with every count ``newer`` has replacing this one's (cumulative counts)."""
        changes = {name: getattr(newer, name) for name in _USAGE_FIELDS if getattr(newer, name) is not None}
        return replace(self, **changes)


def parse_events(chunk: bytes) -> list[StreamEvent]:
    """The complete events in ``chunk`` (an unterminated last event is not returned). Lines are
    read as the SSE format says: ``event:`` names the event, ``data:`` lines are joined with
    newlines, comments (``:``) and other fields are skipped, one space after the colon is dropped.
    An event without data lines is not an event."""
    events = []
    parts = _EVENT_END.split(chunk)
    for block in parts[:-1]:
        event = _parse_block(block)
        if event is not None:
            events.append(event)
    return events


def _parse_block(block: bytes) -> StreamEvent | None:
    name: str | None = None
    data: list[bytes] = []
    for line in _LINE_END.split(block):
        field, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if field == b"event":
            name = value.decode("utf-8", "replace")
        elif field == b"data":
            data.append(value)
    if not data:
        return None
    return StreamEvent(name, b"\n".join(data))


def usage_of(value: Any) -> Usage | None:
    """The counts of a ``usage`` object (a JSON answer's, or an event's); None when it is not an
    object. Only non-negative integers count; anything else is treated as absent."""
    if not isinstance(value, Mapping):
        return None
    counts = {name: _count(value.get(name)) for name in _USAGE_FIELDS}
    return Usage(**counts)


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def error_of(event: StreamEvent) -> StreamError | None:
    """The error an ``error`` event reports; None for any other event."""
    if event.kind != "error":
        return None
    payload = event.payload() or {}
    error = payload.get("error")
    error = error if isinstance(error, Mapping) else {}
    kind, message = error.get("type"), error.get("message")
    return StreamError(
        kind if isinstance(kind, str) else "api_error",
        message if isinstance(message, str) else "",
    )


class StreamState:
    """What the events of one stream said so far: complete or not, its error, its usage and why
    the model stopped."""

    def __init__(self) -> None:
        self.started = False  # message_start arrived
        self.complete = False  # message_stop arrived
        self.error: StreamError | None = None
        self.usage = Usage()
        self.stop_reason: str | None = None

    def see(self, event: StreamEvent) -> None:
        kind = event.kind
        if kind == "message_start":
            self.started = True
            message = (event.payload() or {}).get("message")
            self._add_usage(message.get("usage") if isinstance(message, Mapping) else None)
        elif kind == "message_delta":
            payload = event.payload() or {}
            self._add_usage(payload.get("usage"))
            delta = payload.get("delta")
            reason = delta.get("stop_reason") if isinstance(delta, Mapping) else None
            if isinstance(reason, str):
                self.stop_reason = reason
        elif kind == "message_stop":
            self.complete = True
        elif kind == "error":
            self.error = error_of(event)

    def see_all(self, chunk: bytes) -> list[StreamEvent]:
        """Reads the complete events of ``chunk``; returns them."""
        events = parse_events(chunk)
        for event in events:
            self.see(event)
        return events

    def _add_usage(self, value: Any) -> None:
        usage = usage_of(value)
        if usage is not None:
            self.usage = self.usage.updated(usage)

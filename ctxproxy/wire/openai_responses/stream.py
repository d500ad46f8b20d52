"""A Responses event stream as ctxproxy relays it: what its events are, its framing, its end and its
usage (https://platform.openai.com/docs/api-reference/responses-streaming).

Every event is named and its JSON data repeats the name as ``type``, with a ``sequence_number``::

    event: response.created            {"type": "response.created", "response": {... "status": "in_progress"}}
    event: response.in_progress        (also response.queued)
    event: response.output_item.added  {"output_index": 0, "item": {...}}
    event: response.output_text.delta  {"item_id", "output_index", "content_index", "delta": "Hel"}
    event: response.output_item.done   {"output_index": 0, "item": {...}}
    event: response.completed          {"response": {... "usage": {"input_tokens": ...}}}
    event: error                       {"type": "error", "code", "message", "param"}

What its events are (``RESPONSES_EVENTS``, for the rule of ``ctxproxy.upstream.opening``): an
``error`` or ``response.failed`` event whose error says the prompt is too long
(``context_length_exceeded``) is an overflow; every event but ``response.created``,
``response.in_progress`` and ``response.queued`` (and comments) is content. So an overflow after
the response was created, before its first output, is compacted and retried.

A stream is complete at ``response.completed``, ``response.incomplete`` or ``response.failed``
(or a ``data: [DONE]`` some compatible servers add). When the upstream's stream is over
(``ResponsesEnd``): after a terminal event, nothing follows; after an ``error`` event the upstream
sent, nothing more; after a transport failure, an ``error`` event naming it; a stream that simply
stopped gets an ``error`` event saying it was cut short (:data:`TRUNCATED`). A half event is never
relayed (``ResponsesFramer``). ctxproxy's ``error`` events are numbered after the last
``sequence_number`` relayed.

Usage: ``response.completed`` (and ``.incomplete`` / ``.failed``) carries the response with
``usage.input_tokens``, which on OpenAI includes the cached tokens: the whole prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from ctxproxy.errors import ProxyError, UpstreamError
from ctxproxy.upstream.overflow import sse_error_is_overflow
from ctxproxy.upstream.sse import EventFramer, event_payloads, is_done, split_events

__all__ = [
    "RESPONSES_EVENTS",
    "TERMINAL",
    "TRUNCATED",
    "ResponsesEnd",
    "ResponsesEvents",
    "ResponsesFramer",
    "error_event",
    "event_bytes",
    "input_tokens",
    "payloads",
]

OPENING: Final = frozenset({"response.created", "response.in_progress", "response.queued"})
TERMINAL: Final = frozenset({"response.completed", "response.incomplete", "response.failed"})
REFUSALS: Final = frozenset({"error", "response.failed"})  # events that may say "too long"
TRUNCATED: Final = (
    "The upstream's stream ended before it was complete (it closed without `response.completed`), so the "
    "answer above is cut short. Send the request again."
)
TRUNCATED_CODE: Final = "upstream_stream_truncated"


def payloads(events: bytes) -> list[dict[str, Any]]:
    """The JSON object of each complete event of ``events`` (others, ``[DONE]`` included, skipped)."""
    out = []
    for data in event_payloads(events):
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _kind(data: bytes) -> str | None:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else None


class ResponsesEvents:
    """What a Responses stream's event is (``ctxproxy.upstream.opening.EventKinds``)."""

    def overflow(self, event: bytes) -> bytes | None:
        return next((d for d in event_payloads(event) if _kind(d) in REFUSALS and sse_error_is_overflow(d)), None)

    def is_content(self, event: bytes) -> bool:
        return any(_kind(data) not in OPENING for data in event_payloads(event))


RESPONSES_EVENTS = ResponsesEvents()


class ResponsesFramer(EventFramer):
    """``EventFramer`` whose unterminated last event keeps its ``event:`` line."""

    def end(self) -> bytes:
        """The stream is over: its unterminated final event, terminated, when its data is whole
        (JSON or ``[DONE]``: only the blank line was missing); else nothing."""
        rest = bytes(self._buffer).rstrip(b"\r\n")
        self._buffer.clear()
        whole = rest + b"\n\n"
        events = split_events(whole)
        data = event_payloads(whole)
        if len(events) != 1 or len(data) != 1 or not (is_done(data[0]) or _kind(data[0]) is not None):
            return b""
        return whole


def event_bytes(payload: Mapping[str, Any]) -> bytes:
    """One named event whose data is ``payload`` (its ``type`` names it)."""
    return b"event: " + str(payload.get("type")).encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def error_event(failure: ProxyError, sequence_number: int) -> bytes:
    """An ``error`` event telling ``failure`` (the SDK's ``ResponseErrorEvent``)."""
    payload = {
        "type": "error",
        "code": failure.code or failure.type,
        "message": failure.message,
        "param": failure.param,
        "sequence_number": sequence_number,
    }
    return event_bytes(payload)


def input_tokens(response: Any) -> int | None:
    """A response object's ``usage.input_tokens`` (a non-negative integer), if it has one."""
    usage = response.get("usage") if isinstance(response, Mapping) else None
    value = usage.get("input_tokens") if isinstance(usage, Mapping) else None
    return value if type(value) is int and value >= 0 else None


def cached_tokens(response: Any) -> int | None:
    """A response object's ``usage.input_tokens_details.cached_tokens``: of its input tokens,
    those read from the provider's prompt cache (0 is a miss), if it says."""
    usage = response.get("usage") if isinstance(response, Mapping) else None
    details = usage.get("input_tokens_details") if isinstance(usage, Mapping) else None
    value = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return value if type(value) is int and value >= 0 else None


class ResponsesEnd:
    """Watches the events relayed to the client; says what must follow when the upstream's stream
    is over, and what its terminal event said of the prompt (``prompt_tokens``)."""

    def __init__(self) -> None:
        self.done = False
        self.failed = False
        self.prompt_tokens: int | None = None
        self.cached_tokens: int | None = None
        self._sequence = -1

    def see(self, events: bytes) -> None:
        for data in event_payloads(events):
            if is_done(data):
                self.done = True
                continue
            try:
                payload = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            if isinstance(payload, dict):
                self.see_payload(payload)

    def see_payload(self, payload: Mapping[str, Any]) -> None:
        number = payload.get("sequence_number")
        if type(number) is int:
            self._sequence = max(self._sequence, number)
        kind = payload.get("type")
        if kind in TERMINAL:
            self.done = True
            self.prompt_tokens = input_tokens(payload.get("response"))
            self.cached_tokens = cached_tokens(payload.get("response"))
        elif kind == "error":
            self.failed = True

    @property
    def next_sequence(self) -> int:
        return self._sequence + 1

    def closing(self, failure: ProxyError | None = None) -> bytes:
        if self.done:
            return b""
        if failure is not None:
            return error_event(failure, self.next_sequence)
        if self.failed:
            return b""
        return error_event(UpstreamError(TRUNCATED, code=TRUNCATED_CODE), self.next_sequence)

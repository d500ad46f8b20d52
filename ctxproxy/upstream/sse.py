"""Server-sent events framing for relaying chat streams.

The relay forwards bytes as they arrive but only at event boundaries, so that when the upstream
dies mid-stream the client can still be sent a well-formed error event: a half-written event
followed by an error would be unparseable.

A chat stream is complete when its ``data: [DONE]`` arrived. However the upstream's stream ends,
the client's ends with ``[DONE]`` (``StreamEnd``): after an error event the upstream sent, just
``[DONE]``; after a transport failure, an error event saying so; after a stream that simply
stopped (closed cleanly, at an event boundary or in the middle of an event), an error event
saying it ended before it was complete (``TRUNCATED``). A half event is never relayed.

What a chat stream's events are, for the rule of ``ctxproxy.upstream.opening`` (``CHAT_EVENTS``):
an error event that says the prompt is too long is an overflow; content is every event but a
comment or keep-alive (no data) and a chunk whose deltas only name the role (the first one, or an
Azure-style first chunk with no choices), while no choice has finished.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

import orjson

from ctxproxy.errors import ProxyError, UpstreamError
from ctxproxy.upstream.overflow import may_be_error_event, sse_error_is_overflow

_BOUNDARIES = (b"\r\n\r\n", b"\n\n", b"\r\r")
_EVENT_END = re.compile(b"|".join(re.escape(boundary) for boundary in _BOUNDARIES))
_SAYS_NOTHING: tuple[object, ...] = (None, "", [], {})  # delta values that carry no content
DONE = b"data: [DONE]\n\n"
TRUNCATED = (
    "The upstream's stream ended before it was complete (it closed without `data: [DONE]`), so the answer "
    "above is cut short. Send the request again."
)
TRUNCATED_CODE = "upstream_stream_truncated"


class EventFramer:
    """Buffers a byte stream and releases it up to the last complete event."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> bytes:
        if not self._buffer and chunk.endswith(_BOUNDARIES):
            return chunk  # whole events, nothing held (an upstream's usual write): no copies, no search
        self._buffer += chunk
        end = max(self._last_boundary(b) for b in _BOUNDARIES)
        if end <= 0:
            return b""
        ready = bytes(self._buffer[:end])
        del self._buffer[:end]
        return ready

    def _last_boundary(self, boundary: bytes) -> int:
        found = self._buffer.rfind(boundary)
        return found + len(boundary) if found >= 0 else -1

    def end(self) -> bytes:
        """The stream is over: its unterminated final event, terminated, when that event's data is
        whole (``[DONE]`` or JSON: only the blank line was missing); nothing when it stopped in the
        middle of an event."""
        if not self._buffer:
            return b""  # the stream ended with an event's end: the usual
        rest = bytes(self._buffer)
        self._buffer.clear()
        payloads = event_payloads(rest)
        if not payloads or not all(is_done(p) or _is_json(p) for p in payloads):
            return b""
        return b"".join(sse_event(p) for p in payloads)


class StreamEnd:
    """Watches the events relayed to the client; says what must follow when the upstream's stream is over."""

    def __init__(self) -> None:
        self.done = False  # ``[DONE]`` was relayed: the stream is complete
        self.failed = False  # an error event was relayed

    def see(self, events: bytes) -> None:
        # Only an event holding "[DONE]" or "error" ends or fails the stream: the others (the
        # usual chunk: all of them) are neither split off nor read, only searched.
        done, error = events.find(b"[DONE]"), events.find(b'"error"')
        if done < 0 and error < 0:
            return
        if b"\r" in events:
            events = _normalised(events)
            done, error = events.find(b"[DONE]"), events.find(b'"error"')
        self._see_events(events, b"[DONE]", done)
        self._see_events(events, b'"error"', error)

    def _see_events(self, text: bytes, marker: bytes, at: int) -> None:
        """The payloads of each event of normalised ``text`` holding ``marker`` (first at ``at``):
        each event as ``text.split(b"\\n\\n")`` cuts it, but perhaps for a leading line break,
        which no payload holds. An event seen twice (holding both markers) sees nothing new."""
        while at >= 0:
            after = text.rfind(b"\n\n", 0, at)
            start = after + 2 if after >= 0 else 0
            end = text.find(b"\n\n", at)
            end = len(text) if end < 0 else end
            for payload in _payloads(text[start:end]):
                self.see_payload(payload)
            at = text.find(marker, end)

    def see_payload(self, payload: bytes) -> None:
        if is_done(payload):
            self.done = True
        elif is_error(payload):
            self.failed = True

    def closing(self, failure: ProxyError | None = None) -> bytes:
        """The events that end the client's stream: nothing after ``[DONE]``; else an error event
        (``failure``'s, or ``TRUNCATED`` unless the upstream sent one) and ``[DONE]``."""
        if self.done:
            return b""
        if failure is not None:
            return failure_event(failure) + DONE
        if self.failed:
            return DONE
        return truncated_event() + DONE


def is_done(payload: bytes) -> bool:
    return payload.strip() == b"[DONE]"


def is_error(payload: bytes) -> bool:
    """An error event's data: a JSON object with an ``error`` member."""
    if b'"error"' not in payload:  # cheap: chunks are not parsed twice
        return False
    try:
        parsed = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False
    return isinstance(parsed, dict) and "error" in parsed


def _is_json(payload: bytes) -> bool:
    try:
        orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False
    return True


def error_event(message: str, type_: str, code: str) -> bytes:
    payload = orjson.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})
    return b"data: " + payload + b"\n\n"


def failure_event(failure: ProxyError) -> bytes:
    return error_event(failure.message, failure.type, failure.code or "upstream_error")


def truncated_event() -> bytes:
    return failure_event(UpstreamError(TRUNCATED, code=TRUNCATED_CODE))


def sse_event(payload: bytes) -> bytes:
    """One SSE event; a multi-line payload keeps one ``data:`` line per line."""
    return b"".join(b"data: " + line + b"\n" for line in payload.split(b"\n")) + b"\n"


def event_payloads(events: bytes) -> list[bytes]:
    """The ``data:`` payloads of complete events (multi-line data joined with newlines)."""
    text = _normalised(events)
    end = text.find(b"\n\n")
    if end >= 0 and end == len(text) - 2:  # one event, a read's usual content: nothing to split
        return _payloads(text[:end])
    return [payload for event in text.split(b"\n\n") for payload in _payloads(event)]


def _normalised(events: bytes) -> bytes:
    """``events`` with every line ending a ``\\n``."""
    if b"\r" not in events:  # one byte's search: the usual stream has none
        return events
    return events.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _payloads(event: bytes) -> list[bytes]:
    """The ``data:`` payload of one normalised event (its lines joined), or none."""
    if b"\n" not in event:  # one line: the usual event
        return [event[5:].lstrip(b" ")] if event.startswith(b"data:") else []
    lines = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
    return [b"\n".join(lines)] if lines else []


def split_events(events: bytes) -> list[bytes]:
    """Each complete event of ``events``, its blank line included (an unterminated rest is not one)."""
    return list(iter_events(events))


def iter_events(events: bytes) -> Iterator[bytes]:
    """``split_events``, one at a time: a reader that stops at the first event that decides
    splits no further."""
    at = 0
    for end in _EVENT_END.finditer(events):
        yield events[at : end.end()]
        at = end.end()


def event_span(events: bytes, at: int) -> tuple[int, int] | None:
    """Where the complete event holding ``events[at]`` (a byte that is no line break) begins and
    ends, as ``iter_events`` cuts ``events``; None when that byte is in the unterminated rest.
    Only the bytes around the event are searched, however many events ``events`` holds."""
    end = _EVENT_END.search(events, at)
    return None if end is None else (_event_start(events, at), end.end())


def _event_start(events: bytes, at: int) -> int:
    # A boundary is line breaks only, so no boundary spans another byte: the boundaries
    # ``iter_events`` finds in a run of line breaks are those the run alone holds. The event
    # starts after the last boundary of the nearest run before ``at`` that holds one.
    before = at
    while True:
        run_end = max(events.rfind(b"\n", 0, before), events.rfind(b"\r", 0, before)) + 1
        if run_end == 0:
            return 0
        run_start = run_end - 1
        while run_start and events[run_start - 1] in b"\r\n":
            run_start -= 1
        last = 0
        for boundary in _EVENT_END.finditer(events, run_start, run_end):
            last = boundary.end()
        if last:
            return last
        before = run_start


class ChatEvents:
    """What a chat completions stream's event is (``ctxproxy.upstream.opening.EventKinds``)."""

    def overflow(self, event: bytes) -> bytes | None:
        if not may_be_error_event(event):  # an event's payloads hold no bytes its own do not
            return None
        return next((data for data in event_payloads(event) if sse_error_is_overflow(data)), None)

    def is_content(self, event: bytes) -> bool:
        return any(not _role_only(data) for data in event_payloads(event))


def _role_only(payload: bytes) -> bool:
    """A chunk that says nothing yet: no error, and every choice unfinished with a delta that at
    most names the role."""
    try:
        chunk = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    if not isinstance(choices, list) or "error" in chunk:
        return False
    return all(_choice_says_nothing(choice) for choice in choices)


def _choice_says_nothing(choice: object) -> bool:
    if not isinstance(choice, Mapping) or choice.get("finish_reason") is not None:
        return False
    delta = choice.get("delta")
    return isinstance(delta, Mapping) and all(v in _SAYS_NOTHING for k, v in delta.items() if k != "role")


CHAT_EVENTS = ChatEvents()

"""Server-sent events framing for relaying chat streams.

The relay forwards bytes as they arrive but only at event boundaries, so that when the upstream
dies mid-stream the client can still be sent a well-formed error event: a half-written event
followed by an error would be unparseable.
"""

from __future__ import annotations

import orjson

_BOUNDARIES = (b"\r\n\r\n", b"\n\n", b"\r\r")
DONE = b"data: [DONE]\n\n"


class EventFramer:
    """Buffers a byte stream and releases it up to the last complete event."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> bytes:
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

    def rest(self) -> bytes:
        """Whatever arrived after the last boundary (an unterminated final event)."""
        rest = bytes(self._buffer)
        self._buffer.clear()
        return rest


def error_event(message: str, type_: str, code: str) -> bytes:
    payload = orjson.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})
    return b"data: " + payload + b"\n\n"


def event_payloads(events: bytes) -> list[bytes]:
    """The ``data:`` payloads of complete events (multi-line data joined with newlines)."""
    payloads = []
    for event in events.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n\n"):
        lines = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        if lines:
            payloads.append(b"\n".join(lines))
    return payloads

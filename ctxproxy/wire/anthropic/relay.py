"""How a Messages stream is relayed: what its events are, its framing and its ending, for
``upstream.forward``.

What its events are (``MESSAGES_EVENTS``, for the rule of ``upstream.opening``): an ``error`` event
that says the prompt is too long is an overflow; every event but ``message_start`` and ``ping`` is
content (an event without data is no event). So an overflow after the message started, before its
first content block, is still compacted and retried; one after content is relayed.

Events go on as they arrive, but only at event boundaries (``MessagesFramer``), so a stream that
the upstream cuts can still end with a whole ``event: error``. A Messages stream is complete at
``message_stop`` and has no ``[DONE]``. When the upstream's stream is over (``MessagesEnd``):
after ``message_stop``, nothing follows; after a transport failure, an ``error`` event naming it;
after an ``error`` event the upstream sent itself, nothing more; a stream that simply stopped
(closed cleanly, at an event boundary or in the middle of one) gets an ``error`` event saying it
was cut short. A half event is never relayed.
"""

from __future__ import annotations

from ctxproxy.errors import ProxyError, UpstreamError
from ctxproxy.upstream.overflow import sse_error_is_overflow
from ctxproxy.upstream.sse import EventFramer
from ctxproxy.wire.anthropic.errors import error_event
from ctxproxy.wire.anthropic.sse import StreamState, parse_events

__all__ = ["MESSAGES_EVENTS", "TRUNCATED", "MessagesEnd", "MessagesEvents", "MessagesFramer"]

_OPENING = frozenset({"message_start", "ping"})  # events before a message's content

TRUNCATED = (
    "The upstream's stream ended before it was complete (it closed without `message_stop`), so the answer "
    "above is cut short. Send the request again."
)


class MessagesEvents:
    """What a Messages stream's event is (``ctxproxy.upstream.opening.EventKinds``)."""

    def overflow(self, event: bytes) -> bytes | None:
        return next((e.data for e in parse_events(event) if e.kind == "error" and sse_error_is_overflow(e.data)), None)

    def is_content(self, event: bytes) -> bool:
        return any(e.kind not in _OPENING for e in parse_events(event))


MESSAGES_EVENTS = MessagesEvents()


class MessagesFramer(EventFramer):
    """``EventFramer`` whose unterminated last event keeps its ``event:`` line: a Messages event
    without a name is one an SDK skips."""

    def end(self) -> bytes:
        """The stream is over: its unterminated final event, terminated, when its data is a whole
        JSON object and nothing follows it (only the blank line was missing); else nothing."""
        rest = bytes(self._buffer).rstrip(b"\r\n")
        self._buffer.clear()
        last_line = rest.replace(b"\r\n", b"\n").replace(b"\r", b"\n").rpartition(b"\n")[2]
        whole = rest + b"\n\n"
        events = parse_events(whole)
        if len(events) != 1 or events[0].payload() is None or not last_line.startswith(b"data:"):
            return b""
        return whole


class MessagesEnd:
    """Watches the events relayed to the client (their usage too); says what must follow when the
    upstream's stream is over."""

    def __init__(self) -> None:
        self.state = StreamState()

    def see(self, events: bytes) -> None:
        self.state.see_all(events)

    @property
    def done(self) -> bool:
        return self.state.complete

    @property
    def failed(self) -> bool:
        return self.state.error is not None

    def closing(self, failure: ProxyError | None = None) -> bytes:
        """Nothing after ``message_stop``; else ``failure``'s error event, or ``TRUNCATED``'s unless
        the upstream sent an error event itself."""
        if self.done:
            return b""
        if failure is not None:
            return error_event(failure)
        if self.failed:
            return b""
        return error_event(UpstreamError(TRUNCATED))

"""What a chat completions stream is to the proxy-tool loop (``round_io.StreamShape``): its events
(``sse.CHAT_EVENTS``: an overflow error event before the first content is one), its framing, and
how a failure ends the client's stream — an error event, then ``[DONE]``, as a plain relay's does
(``ctxproxy.upstream.sse``). The loop itself is ``driver``'s, in chat's shapes (``loop``).
"""

from __future__ import annotations

import orjson

from ctxproxy.errors import ProxyError
from ctxproxy.tools.round_io import error_object, round_failed
from ctxproxy.upstream.opening import EventKinds
from ctxproxy.upstream.sse import CHAT_EVENTS, DONE, EventFramer, failure_event, sse_event

__all__ = ["CHAT_STREAM", "ChatStream"]


class ChatStream:
    """A chat completions stream, as the loop's rounds are relayed (``round_io.StreamShape``)."""

    events: EventKinds = CHAT_EVENTS

    def framer(self) -> EventFramer:
        return EventFramer()

    def failure(self, error: ProxyError) -> bytes:
        return failure_event(error) + DONE

    def error_answer(self, status: int, raw: bytes) -> bytes:
        """A later round's HTTP error answer as an SSE error event (the status line has gone)."""
        error = error_object(raw)
        if error is not None:
            return sse_event(orjson.dumps({"error": error})) + DONE
        return self.failure(round_failed(status))


CHAT_STREAM = ChatStream()

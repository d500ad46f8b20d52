"""The one rule for an overflow an upstream states inside a 200 stream: retried only before content.

A stream may open with events that carry no content (OpenAI chat: comments, keep-alives, a first
delta that only names the role; Anthropic: ``message_start``, ``ping``). ``open_stream`` reads
them and holds them — nothing goes to the client yet — until an event decides:

- an error saying the prompt is too long: the stream is dropped, the held events with it, and the
  caller gets ``Overflow`` (compact and retry, as for a refusal with an HTTP error status);
- any other event (content, another error, the stream's end marker), or the end of the stream:
  the held events and everything read with them are returned, to be relayed first. From then on
  an overflow is one more error event, relayed as it came and never retried: the client already
  has the answer's beginning.

Which events are which is all a protocol says (``EventKinds``); the rule itself knows no protocol.
How many events one read returns depends only on how the bytes arrived, so the rule looks at each
event in order, never at "the first chunk". At most :data:`MAX_HELD` bytes are held: an upstream
that sends more without content has its stream relayed from there (a later overflow is then
relayed, not retried), so holding costs bounded memory.
"""

from __future__ import annotations

from typing import Protocol

from ctxproxy.upstream.idle import Reads
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.upstream.overflow_numbers import overflow_numbers
from ctxproxy.upstream.sse import EventFramer, iter_events

__all__ = ["MAX_HELD", "EventKinds", "open_stream", "opening_verdict"]

MAX_HELD = 64 * 1024  # bytes of content-less events held before relaying starts anyway


class EventKinds(Protocol):
    """What one protocol says of one complete SSE event (its bytes, blank line included)."""

    def overflow(self, event: bytes) -> bytes | None:
        """The event's data when it is an error saying the prompt is too long, else None."""
        ...

    def is_content(self, event: bytes) -> bool:
        """Whether the event must reach the client: False only for events that carry nothing the
        client would miss if the stream were dropped and asked for again."""
        ...


def opening_verdict(events: bytes, kinds: EventKinds) -> Overflow | bool:
    """What complete ``events``, read before any content, decide: ``Overflow`` when an overflow
    comes before any content event; True when a content event comes first (relay from here);
    False when none of them decides (hold them, read on)."""
    for event in iter_events(events):
        refusal = kinds.overflow(event)
        if refusal is not None:
            return Overflow(overflow_numbers(refusal))
        if kinds.is_content(event):
            return True
    return False


async def open_stream(content: Reads, framer: EventFramer, kinds: EventKinds) -> bytes | Overflow:
    """Read a stream's opening (``framer`` frames it and keeps the unfinished rest): ``Overflow``
    when it is refused as too long before any content, else the events read, to relay first.
    Transport errors propagate (nothing has been sent)."""
    held = b""
    while True:
        chunk = await content.readany()
        ready = framer.feed(chunk) if chunk else framer.end()
        held += ready
        verdict = opening_verdict(ready, kinds)
        if isinstance(verdict, Overflow):
            return verdict
        if verdict or not chunk or len(held) > MAX_HELD:
            return held

"""What a Gemini answer says, JSON or streamed (``:streamGenerateContent?alt=sse``).

A stream is a sequence of ``data: <GenerateContentResponse>`` events (``\\r\\n\\r\\n`` apart), no
end marker: it is complete once a candidate's ``finishReason`` arrived (or the prompt was blocked:
``promptFeedback.blockReason``), and the upstream closes it. An error is an event of Google's
error object (``{"error": {"code", "message", "status"}}``).

* ``GEMINI_EVENTS`` (``ctxproxy.upstream.opening.EventKinds``): an error event saying the prompt
  is too long ("The input token count (N) exceeds the maximum number of tokens allowed (M)") is an
  overflow; every other event with data is content — Gemini sends nothing before its first
  candidate.
* ``GeminiEnd``: however the upstream's stream ends, the client's ends well-formed: nothing after
  a finished candidate or an error event; else one error event (the failure, or :data:`TRUNCATED`).
* ``usage_of``: ``usageMetadata``'s ``promptTokenCount`` (the whole prompt, the part read from the
  cache included) and ``cachedContentTokenCount``; every chunk carries it, the last one counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ctxproxy.errors import ProxyError, UpstreamError
from ctxproxy.tools.calls import json_object
from ctxproxy.upstream.overflow import sse_error_is_overflow
from ctxproxy.upstream.sse import event_payloads
from ctxproxy.wire.gemini.errors import error_event
from ctxproxy.wire.gemini.fields import field

__all__ = ["GEMINI_EVENTS", "TRUNCATED", "GeminiEnd", "GeminiEvents", "Usage", "usage_of"]

TRUNCATED: Final = (
    "The upstream's stream ended before the answer was complete (no candidate finished), so the answer "
    "above is cut short. Send the request again."
)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int | None = None
    cached_tokens: int | None = None


def usage_of(answer: object) -> Usage | None:
    """The prompt's size a ``GenerateContentResponse`` reports, if it reports one."""
    metadata = field(answer, "usageMetadata") if isinstance(answer, Mapping) else None
    if not isinstance(metadata, Mapping):
        return None
    prompt, cached = field(metadata, "promptTokenCount"), field(metadata, "cachedContentTokenCount")
    return Usage(prompt if type(prompt) is int else None, cached if type(cached) is int else None)


def finished(answer: Mapping[str, Any]) -> bool:
    """Whether a chunk ends the answer: a candidate with a ``finishReason``, or a blocked prompt."""
    candidates = answer.get("candidates")
    for candidate in candidates if isinstance(candidates, list) else ():
        if isinstance(candidate, Mapping) and field(candidate, "finishReason"):
            return True
    feedback = field(answer, "promptFeedback")
    return isinstance(feedback, Mapping) and bool(field(feedback, "blockReason"))


class GeminiEvents:
    """What a Gemini stream's event is (``ctxproxy.upstream.opening.EventKinds``)."""

    def overflow(self, event: bytes) -> bytes | None:
        return next((data for data in event_payloads(event) if sse_error_is_overflow(data)), None)

    def is_content(self, event: bytes) -> bool:
        return bool(event_payloads(event))


GEMINI_EVENTS = GeminiEvents()


class GeminiEnd:
    """Watches the events relayed (``ctxproxy.upstream.relay.Ending``); keeps the last usage seen."""

    def __init__(self) -> None:
        self.done = False
        self.failed = False
        self.usage = Usage()

    def see(self, events: bytes) -> None:
        for data in event_payloads(events):
            answer = json_object(data)
            if answer is None:
                continue
            if "error" in answer:
                self.failed = True
                continue
            self.usage = usage_of(answer) or self.usage
            self.done = self.done or finished(answer)

    def closing(self, failure: ProxyError | None = None) -> bytes:
        if self.done or (failure is None and self.failed):
            return b""
        return error_event(failure if failure is not None else UpstreamError(TRUNCATED))

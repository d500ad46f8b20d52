"""Filtering one streamed round of the Gemini tool loop so the client never sees our calls (pure).

``RoundChunks`` is fed the events of one upstream response in order and returns the bytes to send
now; ``result()`` says what the round was once it has ended. Each event is one
``GenerateContentResponse`` chunk, and a ``functionCall`` part always arrives whole in one:

- A chunk with none of our calls passes as it came; one with ours passes without them, or not at
  all when nothing else is left in it.
- The chunk that finishes the round (a ``finishReason``, a blocked prompt) decides: in a round with
  no call of ours it is held as it came — the client gets it, its usage summed when rounds came
  before, at the end (``closing_event``); in a round with ours, what it shows besides them passes
  at once, without ``finishReason`` and ``usageMetadata``, and a closing chunk of its own follows
  if this round is the last.
- An error event passes (the round is then over), and so does anything that is not a chunk.

The round's parts are kept as the model made them (thoughts, signatures, calls), since a round that
calls ours only is sent back in the next request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ctxproxy.tools.calls import ProxyCall, json_object
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.tools.driver import RoundRead
from ctxproxy.upstream.sse import event_payloads, split_events
from ctxproxy.wire.gemini.fields import field
from ctxproxy.wire.gemini.stream import finished
from ctxproxy.wire.gemini.tool_parts import first_parts, is_ours, shown, split_calls, with_parts

__all__ = ["RoundChunks", "RoundEnd", "chunk_event", "closing_event"]

STOP = "STOP"


def chunk_event(chunk: Mapping[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\r\n\r\n"


@dataclass(frozen=True)
class RoundEnd:
    """What one round was, once its response ended."""

    calls: tuple[ProxyCall, ...]  # ours, in order
    client_calls: bool
    parts: list[Any]  # as the model made them
    usage: Mapping[str, Any] | None  # its last chunk's
    finish: object  # the finishing chunk's finishReason
    last: Mapping[str, Any] | None  # the finishing chunk
    held: bytes  # the finishing chunk as it came, when the round called nothing of ours
    done: bool
    error: bool

    @property
    def read(self) -> RoundRead:
        return RoundRead(self.calls, self.client_calls, self.finish == STOP, self.parts, self.usage)


class RoundChunks:
    """Feed every event of one round; read ``result()`` once it has ended."""

    def __init__(self, tools: ProxyTools) -> None:
        self._tools = tools
        self._parts: list[Any] = []
        self._usage: Mapping[str, Any] | None = None
        self._finish: object = None
        self._last: Mapping[str, Any] | None = None
        self._held = b""
        self._done = False
        self._error = False

    @property
    def done(self) -> bool:
        return self._done or self._error

    def feed_events(self, events: bytes) -> bytes:
        out = b""
        for event in split_events(events):
            payloads = event_payloads(event)
            chunk = json_object(payloads[0]) if len(payloads) == 1 else None
            if chunk is None or "error" in chunk:
                self._error = self._error or (chunk is not None)
                out += event
                continue
            out += self._chunk(event, chunk)
        return out

    def _chunk(self, event: bytes, chunk: Mapping[str, Any]) -> bytes:
        usage = field(chunk, "usageMetadata")
        self._usage = usage if isinstance(usage, Mapping) else self._usage
        parts = first_parts(chunk) or []
        self._parts += parts
        ours = any(is_ours(part, self._tools) for part in self._parts)
        if finished(chunk):
            self._done, self._last = True, chunk
            candidates = chunk.get("candidates")
            first = candidates[0] if isinstance(candidates, list) and candidates else {}
            self._finish = field(first, "finishReason") if isinstance(first, Mapping) else None
            if not ours:
                self._held = event
                return b""
            kept = shown(parts, self._tools)
            return chunk_event(_bare(with_parts(chunk, kept))) if kept else b""
        if not any(is_ours(part, self._tools) for part in parts):
            return event
        kept = shown(parts, self._tools)
        return chunk_event(with_parts(chunk, kept)) if kept else b""

    def end(self) -> bytes:
        return b""

    def result(self) -> RoundEnd:
        calls, client_calls = split_calls(self._parts, self._tools)
        return RoundEnd(
            tuple(calls), client_calls, self._parts, self._usage, self._finish, self._last, self._held,
            self._done, self._error,
        )  # fmt: skip


def _bare(chunk: dict[str, Any]) -> dict[str, Any]:
    """A chunk without its finish and its usage: the answer goes on in the next round."""
    candidates = [
        {k: v for k, v in c.items() if k not in ("finishReason", "finish_reason")} if isinstance(c, Mapping) else c
        for c in chunk.get("candidates") or []
    ]
    return {k: v for k, v in chunk.items() if k not in ("usageMetadata", "usage_metadata")} | {"candidates": candidates}


def closing_event(last: RoundEnd, usage: Mapping[str, Any] | None, pristine: bool) -> bytes:
    """The event that ends the client's stream after ``last``, its usage the sum over the rounds
    (``pristine``: round 1 called nothing of ours, and goes as it came)."""
    if pristine and last.held:
        return last.held
    if last.last is None:
        return b""
    parts = (first_parts(last.last) or []) if last.held else [{"text": ""}]
    return chunk_event(with_parts(last.last, parts, usage))

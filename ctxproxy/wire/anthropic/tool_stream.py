"""Filtering one streamed round of the Messages tool loop so the client never sees our calls (pure).

``RoundEvents`` is fed the events of one upstream response in order (``sse.parse_events``) and
returns the bytes to send now; ``result()`` says what the round was once it has ended:

- ``message_start`` passes in round 1 and is swallowed later (the client reads one message); its
  usage is kept.
- A ``content_block_start`` of a ``tool_use`` block with one of our names starts a block that is
  swallowed with its deltas and its stop; its ``input_json_delta`` pieces are joined into the
  call's arguments. Every other block passes, its ``index`` renumbered so that the blocks the client
  sees are numbered 0, 1, 2 … across every round (``offset``: the blocks earlier rounds showed), as
  the SDKs build their message by that index. An event whose index did not change is sent as it came.
- ``message_delta`` (why the model stopped, the usage) and ``message_stop`` are held: whether the
  client gets them depends on whether this round is the last (``closing_events``).
- ``error`` and ``ping`` pass, and so does any event this module does not know.

The round's content is rebuilt from its events as the model made it (text, thinking and its
signature, citations, tool inputs), since a round that calls ours only is sent back in the next
request. Event shapes: https://docs.claude.com/en/docs/build-with-claude/streaming.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ctxproxy.tools.calls import ProxyCall
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.tools.driver import RoundRead
from ctxproxy.wire.anthropic.sse import StreamEvent, parse_events
from ctxproxy.wire.anthropic.tool_blocks import TOOL_USE, is_ours, proxy_call, stop_reason_shown

__all__ = ["RoundEnd", "RoundEvents", "closing_events", "event_bytes"]

_INPUTS = frozenset({TOOL_USE, "server_tool_use"})  # blocks whose input arrives as input_json_delta
_DELTA_TEXT = {"text_delta": "text", "thinking_delta": "thinking"}  # delta type -> the field it extends


def event_bytes(name: str | None, data: bytes) -> bytes:
    """One event on the wire (``event:`` line only when it has a name)."""
    head = b"event: " + name.encode() + b"\n" if name is not None else b""
    return head + b"data: " + data + b"\n\n"


@dataclass
class _Block:
    block: dict[str, Any]  # as the model made it so far
    ours: bool
    index: int | None  # the client's index; None for ours
    json: list[str] = field(default_factory=list)  # input_json_delta pieces


@dataclass(frozen=True)
class RoundEnd:
    """What one round was, once its response ended."""

    calls: tuple[ProxyCall, ...]  # ours, in order
    client_calls: bool  # it called a client tool too
    content: list[Any]  # its content blocks as the model made them
    shown: int  # the index the client's next block gets
    usage: Mapping[str, Any] | None  # message_start's, updated by message_delta's
    stop_reason: object
    delta: Mapping[str, Any] | None  # the held message_delta
    held: bytes  # the held message_delta and message_stop as they came
    done: bool  # message_stop arrived: the round is complete
    error: bool  # an error event was relayed

    @property
    def read(self) -> RoundRead:
        """The round as the loop reads it: complete when the model stopped for ``tool_use``."""
        return RoundRead(self.calls, self.client_calls, self.stop_reason == TOOL_USE, self.content, self.usage)


class RoundEvents:
    """Feed every event of one round; read ``result()`` once it has ended."""

    def __init__(self, tools: ProxyTools, *, offset: int, first: bool) -> None:
        self._tools = tools
        self._next = offset
        self._first = first
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, Any] | None = None
        self._delta: Mapping[str, Any] | None = None
        self._held = b""
        self.done = False
        self._error = False

    def feed_events(self, events: bytes) -> bytes:
        """Every complete event of ``events`` fed, in order (``ctxproxy.tools.round_io.RoundFeed``)."""
        return b"".join(self.feed(event) for event in parse_events(events))

    def end(self) -> bytes:
        return b""  # nothing is held for the client but what ``closing_events`` sends

    def feed(self, event: StreamEvent) -> bytes:
        payload = event.payload()
        kind = event.kind
        if payload is None or kind == "ping":
            return event_bytes(event.name, event.data)
        if kind == "message_start":
            message = payload.get("message")
            self._update_usage(message.get("usage") if isinstance(message, Mapping) else None)
            return event_bytes(event.name, event.data) if self._first else b""
        if kind in ("content_block_start", "content_block_delta", "content_block_stop"):
            return self._block_event(kind, payload, event)
        if kind == "message_delta":
            self._delta = payload
            self._update_usage(payload.get("usage"))
            self._held += event_bytes(event.name, event.data)
            return b""
        if kind == "message_stop":
            self.done = True
            self._held += event_bytes(event.name, event.data)
            return b""
        self._error = self._error or kind == "error"
        return event_bytes(event.name, event.data)

    def _block_event(self, kind: str, payload: dict[str, Any], event: StreamEvent) -> bytes:
        index = payload.get("index")
        if type(index) is not int:
            return event_bytes(event.name, event.data)  # not ours to judge
        if kind == "content_block_start":
            block = self._start(index, payload.get("content_block"))
        else:
            found = self._blocks.get(index)
            if found is None:
                return event_bytes(event.name, event.data)
            block = found
            if kind == "content_block_delta":
                _apply(block, payload.get("delta"))
        if block.ours or block.index is None:
            return b""
        if block.index == index:
            return event_bytes(event.name, event.data)
        return event_bytes(event.name, orjson.dumps({**payload, "index": block.index}))

    def _start(self, index: int, started: object) -> _Block:
        content = dict(started) if isinstance(started, Mapping) else {}
        ours = is_ours(content, self._tools)
        block = _Block(content, ours, None if ours else self._next)
        if not ours:
            self._next += 1
        self._blocks[index] = block
        return block

    def _update_usage(self, usage: object) -> None:
        if isinstance(usage, Mapping):
            fresh = {key: value for key, value in usage.items() if value is not None}
            self._usage = {**(self._usage or {}), **fresh}  # cumulative counts replace earlier ones

    def result(self) -> RoundEnd:
        blocks = [self._blocks[index] for index in sorted(self._blocks)]
        calls = tuple(proxy_call(b.block, self._tools, "".join(b.json) or None) for b in blocks if b.ours)
        client_calls = any(not b.ours and b.block.get("type") == TOOL_USE for b in blocks)
        inner = self._delta.get("delta") if self._delta is not None else None
        return RoundEnd(
            calls=calls,
            client_calls=client_calls,
            content=[_finished(b) for b in blocks],
            shown=self._next,
            usage=self._usage,
            stop_reason=inner.get("stop_reason") if isinstance(inner, Mapping) else None,
            delta=self._delta,
            held=self._held,
            done=self.done,
            error=self._error,
        )


def _apply(block: _Block, delta: object) -> None:
    """One ``content_block_delta``'s ``delta`` applied to the block it extends."""
    if not isinstance(delta, Mapping):
        return
    kind = delta.get("type")
    content = block.block
    if kind in _DELTA_TEXT:
        name = _DELTA_TEXT[str(kind)]
        piece = delta.get(name)
        if isinstance(piece, str):
            previous = content.get(name)
            content[name] = (previous if isinstance(previous, str) else "") + piece
    elif kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
        block.json.append(delta["partial_json"])
    elif kind == "signature_delta" and isinstance(delta.get("signature"), str):
        content["signature"] = delta["signature"]
    elif kind == "citations_delta" and "citation" in delta:
        cited = content.get("citations")
        content["citations"] = [*(cited if isinstance(cited, list) else []), delta["citation"]]


def _finished(block: _Block) -> dict[str, Any]:
    """The block as the model made it: a tool's input parsed from its pieces (``{}`` when they are
    not a JSON object, as the SDKs would fail to read it)."""
    content = block.block
    if content.get("type") not in _INPUTS or not block.json:
        return content
    try:
        parsed = orjson.loads("".join(block.json))
    except orjson.JSONDecodeError:
        parsed = {}
    return {**content, "input": parsed if isinstance(parsed, dict) else {}}


def closing_events(end: RoundEnd, usage: Mapping[str, Any] | None, pristine: bool) -> bytes:
    """How the client's stream ends after ``end``, the last round (complete): its ``message_delta``
    with the stop reason the client gets and ``usage`` (summed over the rounds), then
    ``message_stop``. ``pristine``: no tool round and no call of ours, so the upstream's own bytes."""
    if pristine and end.delta is not None:
        return end.held
    given = end.delta or {"type": "message_delta", "delta": {"stop_reason": None, "stop_sequence": None}}
    inner = given.get("delta")
    inner = dict(inner) if isinstance(inner, Mapping) else {}
    if "stop_reason" in inner:
        inner["stop_reason"] = stop_reason_shown(inner["stop_reason"], end.client_calls)
    delta = {**given, "delta": inner, "usage": dict(usage) if usage is not None else {"output_tokens": 0}}
    stop = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    return event_bytes("message_delta", orjson.dumps(delta)) + stop

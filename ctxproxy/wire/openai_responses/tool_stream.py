"""Filtering one streamed round of the Responses tool loop so the client never sees our calls (pure).

``RoundItems`` is fed the events of one upstream response in order and returns the bytes to send
now; ``result()`` says what the round was once it has ended:

- ``response.created`` / ``.in_progress`` / ``.queued`` pass in round 1 (its response's ``id`` is
  the one the client's response keeps) and are swallowed later: the client reads one response.
- An output item that is one of our ``function_call`` items is swallowed from its
  ``response.output_item.added`` on, with every event of its ``output_index``. A ``reasoning`` item
  is held until an item the client sees starts (then it is sent first), or another reasoning item
  or the round's end comes: then it is dropped when it led to our calls alone (the API refuses a
  reasoning item without the item it produced), else sent. Every item the client sees is numbered
  0, 1, 2 … across every round (``offset``: the items earlier rounds showed), as the SDK builds its
  response by ``output_index``.
- The terminal event (``response.completed``, ``.incomplete``, ``.failed``) is held: whether the
  client gets it depends on whether this round is the last (``closing_event``).
- ``error`` passes, and so does any event this module does not know.

Later rounds' events are renumbered after the last ``sequence_number`` the client saw; an event
whose numbers did not change is sent as it came. The round's output is what its
``response.output_item.done`` events carried (or the terminal response's ``output``), for sending
it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from ctxproxy.tools.calls import ProxyCall
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.tools.driver import RoundRead
from ctxproxy.upstream.sse import event_payloads, split_events
from ctxproxy.wire.openai_responses.stream import OPENING, TERMINAL, event_bytes
from ctxproxy.wire.openai_responses.tool_items import REASONING, is_ours, shown, split_calls

__all__ = ["RoundEnd", "RoundItems", "Sequence", "closing_event"]

ADDED: Final = "response.output_item.added"
DONE: Final = "response.output_item.done"


@dataclass
class Sequence:
    """The next ``sequence_number`` the client's stream takes (shared by a request's rounds)."""

    next: int = 0


@dataclass
class _Item:
    ours: bool
    index: int | None = None  # the client's output_index, once it is shown
    held: list[dict[str, Any]] = field(default_factory=list)  # a reasoning item's events, held
    led_to_ours: bool = False  # a held reasoning item was followed by a call of ours


@dataclass(frozen=True)
class RoundEnd:
    """What one round was, once its response ended."""

    calls: tuple[ProxyCall, ...]
    client_calls: bool
    output: list[Any]  # its output items as the model made them
    shown: int  # the output_index the client's next item gets
    usage: Mapping[str, Any] | None
    status: object
    response: Mapping[str, Any] | None  # the terminal event's response
    terminal: Mapping[str, Any] | None  # the terminal event
    held: bytes  # the terminal event as it came
    response_id: object  # round 1's response id
    done: bool
    error: bool

    @property
    def read(self) -> RoundRead:
        return RoundRead(self.calls, self.client_calls, self.status == "completed", self.output, self.usage)


class RoundItems:
    """Feed every event of one round; read ``result()`` once it has ended."""

    def __init__(
        self, tools: ProxyTools, sequence: Sequence, *, offset: int, first: bool, response_id: object = None
    ) -> None:
        self._tools = tools
        self._sequence = sequence
        self._base = 0 if first else sequence.next  # added to a later round's own numbers
        self._next = offset
        self._first = first
        self._items: dict[int, _Item] = {}
        self._pending: int | None = None  # the reasoning item being held
        self._done_items: dict[int, Any] = {}
        self._terminal: dict[str, Any] | None = None
        self._held = b""
        self._response_id = response_id
        self.done = False
        self._error = False

    def feed_events(self, events: bytes) -> bytes:
        return b"".join(self._feed(event) for event in split_events(events))

    def end(self) -> bytes:
        return self._settle()  # a reasoning item still held is the round's last

    def _feed(self, event: bytes) -> bytes:
        data = event_payloads(event)
        payload = _json(data[0]) if len(data) == 1 else None
        if payload is None:
            return event
        kind = payload.get("type")
        if kind in OPENING:
            if self._first:
                response = payload.get("response")
                self._response_id = response.get("id") if isinstance(response, Mapping) else None
                return self._send(payload, event)
            return b""
        if kind in TERMINAL:
            self.done = True
            self._terminal, self._held = payload, event
            return self._settle()
        index = payload.get("output_index")
        if type(index) is int:
            return self._item_event(kind, index, payload, event)
        self._error = self._error or kind == "error"
        return self._send(payload, event)

    def _item_event(self, kind: object, index: int, payload: dict[str, Any], event: bytes) -> bytes:
        if kind == DONE:
            self._done_items[index] = payload.get("item")
        item = self._items.get(index)
        if kind == ADDED or item is None:
            return self._start(index, payload, event)
        if item.ours:
            return b""
        if index == self._pending:
            item.held.append(payload)
            return b""
        return self._send(payload, event, item.index)

    def _start(self, index: int, payload: dict[str, Any], event: bytes) -> bytes:
        added = payload.get("item")
        if is_ours(added, self._tools):
            self._items[index] = _Item(ours=True)
            if self._pending is not None:
                self._items[self._pending].led_to_ours = True
            return b""
        item = self._items[index] = _Item(ours=False)
        if isinstance(added, Mapping) and added.get("type") == REASONING:
            out = self._settle()
            self._pending = index
            item.held.append(payload)
            return out
        out = self._flush()
        item.index = self._take_index()
        return out + self._send(payload, event, item.index)

    def _settle(self) -> bytes:
        """The held reasoning item's fate once it can lead to nothing more: dropped when it led to
        our calls alone, else sent."""
        if self._pending is not None and self._items[self._pending].led_to_ours:
            self._items[self._pending].ours = True
            self._pending = None
        return self._flush()

    def _flush(self) -> bytes:
        """Send the held reasoning item, if any, numbered as it is shown now."""
        if self._pending is None:
            return b""
        item = self._items[self._pending]
        self._pending = None
        item.index = self._take_index()
        sent = b"".join(self._send(payload, None, item.index) for payload in item.held)
        item.held.clear()
        return sent

    def _take_index(self) -> int:
        index, self._next = self._next, self._next + 1
        return index

    def _send(self, payload: dict[str, Any], event: bytes | None, index: int | None = None) -> bytes:
        """The event with the client's numbers; its own bytes when they did not change."""
        changed = dict(payload)
        number = payload.get("sequence_number")
        if type(number) is int:
            changed["sequence_number"] = number + self._base
            self._sequence.next = max(self._sequence.next, number + self._base + 1)
        if index is not None:
            changed["output_index"] = index
        return event if event is not None and changed == payload else event_bytes(changed)

    def result(self) -> RoundEnd:
        response = self._terminal.get("response") if self._terminal is not None else None
        response = response if isinstance(response, Mapping) else None
        given = response.get("output") if response is not None else None
        output = given if isinstance(given, list) and given else [self._done_items[i] for i in sorted(self._done_items)]
        calls, client_calls = split_calls(output, self._tools)
        usage = response.get("usage") if response is not None else None
        return RoundEnd(
            calls=tuple(calls),
            client_calls=client_calls,
            output=output,
            shown=self._next,
            usage=usage if isinstance(usage, Mapping) else None,
            status=response.get("status") if response is not None else None,
            response=response,
            terminal=self._terminal,
            held=self._held,
            response_id=self._response_id,
            done=self.done,
            error=self._error,
        )


def closing_event(
    last: RoundEnd, tools: ProxyTools, sequence: Sequence, usage: Mapping[str, Any] | None, earlier: list[Any]
) -> bytes:
    """The terminal event the client's stream ends with after ``last`` (complete): round 1's
    response id, every round's shown output, the usage summed over the rounds."""
    terminal = last.terminal or {"type": "response.completed"}
    response = dict(last.response or {})
    if last.response_id is not None:
        response["id"] = last.response_id
    response["output"] = [*earlier, *shown(last.output, tools)]
    if usage is not None:
        response["usage"] = dict(usage)
    number, sequence.next = sequence.next, sequence.next + 1
    return event_bytes({**terminal, "response": response, "sequence_number": number})


def _json(data: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None

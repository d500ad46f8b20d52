"""Filtering one streamed upstream round so the client never sees a proxy-tool call.

``RoundFilter`` is fed the ``data:`` payloads of one upstream response, in order, and returns the
bytes to send now; ``end()`` when the response is over. It is pure (no I/O) and keeps only what
the end of the round needs:

- content, reasoning and role deltas pass at once (the answer stays streamed); in a round after
  one that streamed text, the first text is preceded by ``ROUND_SEPARATOR`` (``lead``), and the
  first reasoning likewise after one that streamed reasoning (``reasoning_lead``);
- tool-call fragments go through a ``CallTracker`` (``fragments``): ours are swallowed and
  accumulated, the client's pass renumbered 0, 1, … over the client's calls only, and a call
  whose name does not yet say whose it is is held until it does;
- the chunk carrying ``finish_reason`` and the usage-only chunk (``choices: []``) are held back:
  whether they are sent depends on whether this round is the last (``closing_events``);
- an ``error`` event passes; ``[DONE]`` is swallowed (the loop sends one at the very end), and
  noted: a round whose stream ended without it is incomplete (``RoundResult.done``).

Rounds after the first take the first round's completion ``id`` and drop the repeated ``role``
delta, so the client reads one completion. Chunks nothing is changed in are forwarded as the
upstream's bytes, not re-serialised. The loop offers tools only when ``n`` is 1, so every chunk
has at most one choice.

The OpenAI stream shape this follows: a tool call starts with
``{"index": i, "id": "call_…", "type": "function", "function": {"name": "…", "arguments": ""}}``
and continues with ``{"index": i, "function": {"arguments": "<fragment>"}}``; the finish chunk has
an empty delta; with ``stream_options.include_usage`` every chunk has ``"usage": null`` and a last
chunk has ``"choices": []`` and the usage. Other shapes (no ``index``, the name in a later
fragment) are described in ``fragments``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ctxproxy.tools.calls import ProxyCall, finish_allows_answers
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.tools.driver import RoundRead
from ctxproxy.tools.fragments import CallTracker
from ctxproxy.upstream.sse import event_payloads, is_done, sse_event

_EMPTY: tuple[object, ...] = (None, "", [], {})  # delta values that say nothing


@dataclass(frozen=True)
class Held:
    """A chunk held back: ``raw`` is the upstream's payload when it can still be sent unchanged."""

    chunk: Mapping[str, Any]
    raw: bytes | None


@dataclass(frozen=True)
class RoundResult:
    proxy_calls: tuple[ProxyCall, ...]
    client_calls: bool
    finish: Held | None
    usage_chunk: Held | None
    usage: Mapping[str, Any] | None
    finish_reason: str | None
    content: str  # what this round said, without ``lead`` (sent back in the next round's request)
    reasoning: str
    completion_id: str | None
    error: bool  # an error event was relayed
    done: bool  # the round's ``[DONE]`` arrived: its stream is complete

    @property
    def read(self) -> RoundRead:
        """The round as the loop reads it: complete when it finished, neither cut nor withheld; its
        content is its text and its reasoning, as the next round sends them back."""
        complete = self.finish_reason is not None and finish_allows_answers(self.finish_reason)
        return RoundRead(self.proxy_calls, self.client_calls, complete, (self.content, self.reasoning), self.usage)


class RoundFilter:
    """Feed every ``data:`` payload of one round; read ``result()`` when the round has ended."""

    def __init__(
        self,
        tools: ProxyTools,
        completion_id: str | None = None,
        *,
        client_names: frozenset[str] = frozenset(),
        lead: str = "",
        reasoning_lead: str = "",
    ) -> None:
        """``completion_id``: the first round's id, for every later round (None in the first).
        ``client_names``: the client's tool names. ``lead``: text the client gets before this
        round's first text (the separator from an earlier round's); ``reasoning_lead`` likewise
        before its first reasoning."""
        self._calls = CallTracker(tools, client_names)
        self._later = completion_id is not None
        self._completion_id = completion_id
        self._lead = lead
        self._reasoning_lead = reasoning_lead
        self._template: dict[str, Any] | None = None  # the latest chunk, for one the filter has to make
        self._finish: Held | None = None
        self._usage_chunk: Held | None = None
        self._usage: Mapping[str, Any] | None = None
        self._finish_reason: str | None = None
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._error = False
        self._done = False

    def feed(self, payload: bytes) -> bytes:
        if is_done(payload):
            self._done = True
            return b""
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return sse_event(payload)  # not ours to judge
        if not isinstance(chunk, dict):
            return sse_event(payload)
        if "error" in chunk:
            self._error = True
            return sse_event(payload)
        return self._chunk(chunk, payload)

    def feed_events(self, events: bytes) -> bytes:
        """Every complete event of ``events`` fed, in order (``round_io.RoundFeed``)."""
        return b"".join(self.feed(payload) for payload in event_payloads(events))

    def _chunk(self, chunk: dict[str, Any], payload: bytes) -> bytes:
        changed = False
        if self._completion_id is None and isinstance(chunk.get("id"), str):
            self._completion_id = chunk["id"]
        elif self._later and "id" in chunk and chunk["id"] != self._completion_id:
            chunk["id"] = self._completion_id
            changed = True
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self._usage = usage
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            if isinstance(usage, Mapping):
                self._usage_chunk = Held(chunk, None if changed else payload)
                return b""
            return sse_event(orjson.dumps(chunk) if changed else payload)
        choice = choices[0]
        if not isinstance(choice, dict):
            return sse_event(orjson.dumps(chunk) if changed else payload)
        self._template = chunk
        given = choice.get("delta")  # some upstreams leave it out of the finish chunk
        finish_reason = choice.get("finish_reason")
        delta, delta_changed = self._delta(given if isinstance(given, Mapping) else {}, finish_reason is not None)
        changed = changed or delta_changed
        if finish_reason is not None:
            return self._hold_finish(chunk, choice, delta, payload if not changed else None)
        if isinstance(usage, Mapping):  # usage on an ordinary chunk: only the summed total reaches the client
            chunk["usage"] = None
            changed = True
        if not changed:
            return sse_event(payload)
        if all(value in _EMPTY for value in delta.values()) and choice.get("logprobs") in _EMPTY:
            return b""  # nothing left once our call (or a repeated role) is taken out
        chunk["choices"] = [{**choice, "delta": delta}, *choices[1:]]
        return sse_event(orjson.dumps(chunk))

    def _delta(self, delta: Mapping[str, Any], finishing: bool) -> tuple[dict[str, Any], bool]:
        """The delta as the client sees it, and whether that differs from the upstream's.

        ``finishing``: the finish chunk's delta; the round's calls are complete after it."""
        out = dict(delta)
        changed = False
        content = out.get("content")
        if isinstance(content, str):
            self._content.append(content)
            if content and self._lead:
                out["content"] = self._lead + content
                self._lead = ""
                changed = True
        reasoning = out.get("reasoning_content")
        if isinstance(reasoning, str):
            self._reasoning.append(reasoning)
            if reasoning and self._reasoning_lead:
                out["reasoning_content"] = self._reasoning_lead + reasoning
                self._reasoning_lead = ""
                changed = True
        if self._later and "role" in out:
            del out["role"]  # the client already has the role from the first round
            changed = True
        calls = out.get("tool_calls")
        given = calls if isinstance(calls, list) else []
        kept = [relayed for fragment in given for relayed in self._calls.route(fragment)]
        if finishing:
            kept += self._calls.settle()
        if kept != given:
            changed = True
            if kept:
                out["tool_calls"] = kept
            else:
                out.pop("tool_calls", None)
        return out, changed

    def _hold_finish(
        self, chunk: dict[str, Any], choice: dict[str, Any], delta: dict[str, Any], raw: bytes | None
    ) -> bytes:
        """Hold the finish chunk; what it carries besides (content, a client call) goes out now."""
        self._finish_reason = str(choice["finish_reason"])
        if all(value in _EMPTY for value in delta.values()):
            self._finish = Held({**chunk, "choices": [{**choice, "delta": delta}]}, raw)
            return b""
        now = {**chunk, "choices": [{**choice, "delta": delta, "finish_reason": None}]}
        if "usage" in now:
            now["usage"] = None
        self._finish = Held({**chunk, "choices": [{**choice, "delta": {}}]}, None)
        return sse_event(orjson.dumps(now))

    @property
    def done(self) -> bool:
        """The round's ``[DONE]`` has arrived."""
        return self._done

    def end(self) -> bytes:
        """The upstream response is over: a client call still held (a round cut before its finish
        chunk) is released now. Nothing after an error event."""
        released = self._calls.settle()
        if not released or self._error or self._template is None:
            return b""
        chunk = dict(self._template)
        chunk["choices"] = [{"index": 0, "delta": {"tool_calls": released}, "logprobs": None, "finish_reason": None}]
        if "usage" in chunk:
            chunk["usage"] = None
        return sse_event(orjson.dumps(chunk))

    def result(self) -> RoundResult:
        return RoundResult(
            proxy_calls=self._calls.proxy_calls(),
            client_calls=self._calls.client_calls,
            finish=self._finish,
            usage_chunk=self._usage_chunk,
            usage=self._usage,
            finish_reason=self._finish_reason,
            content="".join(self._content),
            reasoning="".join(self._reasoning),
            completion_id=self._completion_id,
            error=self._error,
            done=self._done,
        )


def closing_events(last: RoundResult, usage: Mapping[str, Any] | None, include_usage: bool, rounds: int) -> bytes:
    """The held finish and usage chunks of the last round, as the client gets them (without ``[DONE]``).

    ``usage``: summed over all rounds; ``rounds``: tool rounds answered before ``last``. A stream
    that had no tool round and no proxy call is closed with the upstream's own bytes.
    """
    pristine = rounds == 0 and not last.proxy_calls
    out = b""
    finish = last.finish
    if finish is not None:
        if pristine and finish.raw is not None:
            out += sse_event(finish.raw)
        else:
            out += sse_event(orjson.dumps(_closing_finish(finish.chunk, last.client_calls, usage)))
    held = last.usage_chunk
    if held is not None:
        if pristine and held.raw is not None:
            out += sse_event(held.raw)
        else:
            out += sse_event(orjson.dumps({**held.chunk, "usage": usage}))
    elif include_usage and usage is not None and finish is not None and finish.chunk.get("usage") is None:
        out += sse_event(orjson.dumps(_usage_chunk(finish.chunk, usage)))
    return out


def _closing_finish(chunk: Mapping[str, Any], client_calls: bool, usage: Mapping[str, Any] | None) -> dict[str, Any]:
    out = dict(chunk)
    choices = out.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        choice = dict(choices[0])
        if choice.get("finish_reason") == "tool_calls" and not client_calls:
            choice["finish_reason"] = "stop"  # our calls were taken out: none reaches the client
        out["choices"] = [choice, *choices[1:]]
    if out.get("usage") is not None:
        out["usage"] = usage
    return out


def _usage_chunk(finish: Mapping[str, Any], usage: Mapping[str, Any]) -> dict[str, Any]:
    """A usage-only chunk shaped like the upstream's finish chunk, for a client that asked for usage."""
    out = {key: value for key, value in finish.items() if key not in ("choices", "usage")}
    return {**out, "choices": [], "usage": usage}

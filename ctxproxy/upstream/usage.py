"""The upstream's own count of a prompt: ``usage.prompt_tokens`` of a chat answer.

A JSON answer carries it in ``usage``; a stream only when asked (``stream_options.include_usage``),
in a chunk of its own with ``choices: []`` just before ``[DONE]``. ``ask_for_usage`` asks for it
when the client did not, and then the :class:`UsageTap` takes that chunk out of what is relayed,
so the client's stream is what it would have been (the other chunks' ``"usage": null`` aside,
which every OpenAI client reads as "no usage"). A client that asked gets its chunk untouched.

An answer that reports cached prompt tokens is read but marked ``prompt_tokens_partial``: providers
count those differently (some leave them out of ``prompt_tokens``), so it teaches nothing. Every number is
checked: only a positive integer below :data:`MAX_TOKENS` counts (a server that does not count
reports 0). The cached count itself (``cached_tokens``: OpenAI's ``prompt_tokens_details.cached_tokens``,
DeepSeek's ``prompt_cache_hit_tokens``) is kept for pricing, 0 included (a miss).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

import orjson

from ctxproxy.upstream.body import Outgoing, Spliced
from ctxproxy.upstream.sse import event_payloads, event_span

__all__ = ["UsageTap", "ask_for_usage", "client_asked_usage", "plausible_tokens"]

MAX_TOKENS = 100_000_000
_PROMPT_TOKENS = b'"prompt_tokens"'
_ASK = b'"stream_options":{"include_usage":true},'


def client_asked_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, Mapping) and options.get("include_usage") is True


def ask_for_usage(raw: bytes, body: Mapping[str, Any]) -> Outgoing:
    """``raw`` (the JSON object ``body``) asking for the stream's usage chunk: the option inserted
    after its opening brace, the client's bytes after it not copied (``body.Spliced``)."""
    if "stream_options" not in body:
        start = raw.index(b"{") + 1  # raw is a JSON object: its first byte that is not whitespace
        return Spliced(raw[:start] + (_ASK if body else _ASK[:-1]), memoryview(raw)[start:])
    options = body["stream_options"]
    merged = {**options, "include_usage": True} if isinstance(options, Mapping) else {"include_usage": True}
    return orjson.dumps({**body, "stream_options": merged})


class UsageTap:
    """Reads ``usage.prompt_tokens`` from an answer; with ``strip``, takes the stream's usage chunk
    out of the events relayed."""

    def __init__(self, *, strip: bool = False) -> None:
        self.strip = strip
        self.prompt_tokens: int | None = None
        self.prompt_tokens_partial = False  # cached tokens were reported: the count may leave them out
        self.cached_tokens: int | None = None  # of prompt_tokens, read from the provider's cache

    def see_json(self, body: bytes) -> None:
        if b'"prompt_tokens"' not in body:
            return
        try:
            answer = orjson.loads(body)
        except orjson.JSONDecodeError:
            return
        self._read(answer)

    def events(self, events: bytes) -> bytes:
        """``events`` (complete SSE events) as they go on to the client. Only an event holding
        ``"prompt_tokens"`` is cut out and read (``sse.event_span``); the others are not split."""
        at = events.find(_PROMPT_TOKENS)
        kept: list[bytes] = []
        start_kept = 0
        while at >= 0 and (span := event_span(events, at)) is not None:
            start, end = span
            if self._usage_only(events[start:end]):
                kept.append(events[start_kept:start])
                start_kept = end
            at = events.find(_PROMPT_TOKENS, end)
        if not kept:
            return events
        kept.append(events[start_kept:])
        return b"".join(kept)

    def _usage_only(self, event: bytes) -> bool:
        """Reads the event's usage; True when it is the usage chunk to take out."""
        payloads = event_payloads(event)
        if len(payloads) != 1 or b'"prompt_tokens"' not in payloads[0]:
            return False
        try:
            chunk = orjson.loads(payloads[0])
        except orjson.JSONDecodeError:
            return False
        found = self._read(chunk)
        return found and self.strip and isinstance(chunk, dict) and chunk.get("choices") in ([], None)

    def _read(self, answer: object) -> bool:
        usage = answer.get("usage") if isinstance(answer, dict) else None
        if not isinstance(usage, dict) or not plausible_tokens(tokens := usage.get("prompt_tokens")):
            return False
        self.prompt_tokens = tokens
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        self.prompt_tokens_partial = plausible_tokens(cached) or plausible_tokens(usage.get("cache_read_input_tokens"))
        reported = next(
            (c for c in (cached, usage.get("prompt_cache_hit_tokens")) if plausible_tokens(c) or c == 0), None
        )
        self.cached_tokens = reported if isinstance(reported, int) and not isinstance(reported, bool) else None
        return True


def plausible_tokens(value: object) -> TypeGuard[int]:
    """A token count an upstream could mean: a positive integer below :data:`MAX_TOKENS`."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < MAX_TOKENS

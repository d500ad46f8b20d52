"""What prompts cost with a provider's prompt cache, measured on the bodies the upstream received.

Providers (OpenAI, Anthropic, Gemini, DeepSeek) bill the part of a prompt that repeats the
previous prompt's bytes from its start at about a tenth of the price. A prompt is read here as
the provider reads it, a list of *units* in order: the tool definitions (one unit), the system
prompt (Messages: one unit; chat: it is the first message) and each message, each serialised
(orjson, keys as sent). A request's *cached* tokens are those of the longest run of leading units
byte-identical to the previous request's of the same conversation (whole units: a message that
changed anywhere is not cached, nor is anything after it). Its cache-priced cost, in full-price
tokens, is ``uncached + discount × cached``; summed over requests that is
``forwarded − (1 − discount) × cached``, so the sums below are kept and the discount is applied
when reporting. Anthropic's ``cache_control`` markers are not content (moving a breakpoint does
not change the cached bytes) and are left out of a Messages unit's bytes.

The *floor* is what the client's own requests cost if each paid only for what is new in it (its
tokens beyond the longest prefix it shares with the client's previous request) at full price and
nothing for the rest: no compaction can do better, since every new token is read once.

Tokens: ``ctxproxy.tokens.TokenCounter`` (cl100k), a message as ctxproxy's counter counts it
(Messages messages converted with ``ctxproxy.wire.anthropic.convert.to_messages``), the tool
definitions as their compact JSON, 3 reply-priming tokens a request, never cached. Each distinct
unit is counted once (memoised by its bytes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import orjson

from ctxproxy.session import message_digest
from ctxproxy.tokens import TokenCounter
from ctxproxy.wire.anthropic.convert import to_messages

PRIMING = 3


class Unit(NamedTuple):  # a tuple: lists of units compare in C
    raw: bytes
    tokens: int


class Shape(Protocol):
    """A protocol's bodies as the provider reads them."""

    name: str
    path: str  # the route under /t/{tenant}
    headers: Mapping[str, str]
    answer_mark: bytes  # in every successful answer
    counts_like_proxy: bool  # X-Ctx-Tokens-After is ctxproxy's count of what this module counts

    def units(self, body: Mapping[str, Any]) -> tuple[list[Unit], int]:
        """The body's units in order, and how many come before the first message."""
        ...


class Units:
    """Counts each distinct unit once."""

    def __init__(self, model: str) -> None:
        self.counter = TokenCounter()
        self.model = model
        self._memo: dict[bytes, int] = {}

    def message(self, raw: bytes, message: Mapping[str, Any]) -> Unit:
        tokens = self._memo.get(raw)
        if tokens is None:
            tokens = self._memo[raw] = self.counter.count_message(message, message_digest(message), self.model)
        return Unit(raw, tokens)

    def canonical(self, raw: bytes, messages: Sequence[Mapping[str, Any]]) -> Unit:
        """A unit standing for several canonical messages (a Messages message or system prompt)."""
        tokens = self._memo.get(raw)
        if tokens is None:
            counted = (self.counter.count_message(m, message_digest(m), self.model) for m in messages)
            tokens = self._memo[raw] = sum(counted)
        return Unit(raw, tokens)

    def tools(self, definitions: Sequence[Mapping[str, Any]]) -> Unit:
        raw = b"tools:" + orjson.dumps(definitions)
        tokens = self._memo.get(raw)
        if tokens is None:
            tokens = self._memo[raw] = self.counter.count_tools(definitions, self.model)
        return Unit(raw, tokens)


class ChatShape:
    name = "chat"
    path = "/v1/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench-not-a-key"}
    answer_mark = b'"chat.completion"'
    counts_like_proxy = True

    def __init__(self, units: Units) -> None:
        self._units = units

    def units(self, body: Mapping[str, Any]) -> tuple[list[Unit], int]:
        tools = body.get("tools")
        head = [self._units.tools(tools)] if tools else []
        messages = body.get("messages") or []
        return head + [self._units.message(orjson.dumps(m), m) for m in messages], len(head)


def _without_breakpoints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_breakpoints(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_breakpoints(v) for v in value]
    return value


class MessagesShape:
    name = "messages"
    path = "/v1/messages"
    headers = {"Content-Type": "application/json", "x-api-key": "sk-bench-not-a-key", "anthropic-version": "2023-06-01"}
    answer_mark = b'"type":"message"'
    counts_like_proxy = False  # ctxproxy counts the canonical messages, and their priming, apart

    def __init__(self, units: Units) -> None:
        self._units = units

    def units(self, body: Mapping[str, Any]) -> tuple[list[Unit], int]:
        head = []
        tools = body.get("tools")
        if tools:
            head.append(self._units.tools(_without_breakpoints(tools)))
        system = body.get("system")
        if system:
            raw = b"system:" + orjson.dumps(_without_breakpoints(system))
            head.append(self._units.canonical(raw, to_messages({"system": system, "messages": []})))
        out = list(head)
        for m in body.get("messages") or []:
            plain = _without_breakpoints(m)
            out.append(self._units.canonical(orjson.dumps(plain), to_messages({"messages": [plain]})))
        return out, len(head)


def common_prefix(a: Sequence[Unit], b: Sequence[Unit]) -> int:
    """How many leading units ``a`` and ``b`` share byte for byte."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    for i in range(n):
        if a[i].raw != b[i].raw:
            return i
    return n


@dataclass
class CacheMeter:
    """One conversation's requests, in order: what they forwarded and what a cache would serve."""

    requests: int = 0
    forwarded: int = 0  # tokens, priming included
    cached: int = 0  # tokens of each request's leading units identical to the previous request's
    cached_messages: int = 0
    extends: int = 0  # requests whose prompt starts with the whole previous prompt
    pairs: int = 0
    _previous: Sequence[Unit] | None = None

    def add(self, units: Sequence[Unit]) -> tuple[int, int]:
        """Count one request; its tokens and its cached tokens."""
        tokens = sum(u.tokens for u in units) + PRIMING
        cached = 0
        if self._previous is not None:
            common = common_prefix(self._previous, units)
            cached = sum(u.tokens for u in units[:common])
            self.pairs += 1
            self.extends += common == len(self._previous)
            self.cached_messages += common
        self.requests += 1
        self.forwarded += tokens
        self.cached += cached
        self._previous = units
        return tokens, cached

    def cost(self, discount: float) -> float:
        """In full-price tokens: uncached + discount × cached."""
        return self.forwarded - (1 - discount) * self.cached

    @property
    def floor(self) -> int:
        """Of a client's own requests: what is new in each, at full price (module docstring)."""
        return self.forwarded - self.cached

    def __iadd__(self, other: CacheMeter) -> CacheMeter:
        self.requests += other.requests
        self.forwarded += other.forwarded
        self.cached += other.cached
        self.cached_messages += other.cached_messages
        self.extends += other.extends
        self.pairs += other.pairs
        return self

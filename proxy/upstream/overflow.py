"""Recognise upstream errors that mean "the prompt does not fit in the model's context window".

Pure functions, no I/O: the relay calls :func:`is_context_overflow` on an HTTP error response and
:func:`sse_error_is_overflow` on an SSE error event that arrived before any byte reached the client,
and recovers (compacts harder, retries once) only when they say yes.

Recognised providers and the wording they use (matched case-insensitively):

- OpenAI: code ``context_length_exceeded``, "This model's maximum context length is N tokens ...
  Please reduce the length of the messages."
- Azure OpenAI / OpenRouter / Together and other OpenAI clones: the same code or wording.
- Anthropic: "prompt is too long: N tokens > M maximum", "input length and `max_tokens` exceed
  context limit" (with or without backticks).
- Google Gemini: "The input token count (N) exceeds the maximum number of tokens allowed (M)."
- vLLM: "This model's maximum context length is N tokens ..." (400, some builds 500).
- llama.cpp server: type ``exceed_context_size_error``, "the request exceeds the available
  context size" (400, some builds 500).
- LM Studio: "... is greater than the context length ...".
- Mistral: "Prompt contains N tokens ..., too large for model with M maximum context length".
- Groq: code ``context_length_exceeded``, "Please reduce the length of the messages or completion."
- AWS Bedrock: "Input is too long for requested model."
- Generic: "context length exceeded", "token limit exceeded", "too many tokens", "context window".

Not overflows, although they look alike: HTTP 413 ``request_too_large`` / "Request body too large"
(a body-size limit, compaction is not the cure), OpenAI ``string_above_max_length`` ("string too
long. Expected a string with maximum length ..."), rate limits counted in tokens per minute (TPM),
authentication errors, and 5xx errors without context-length wording.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.upstream.overflow_numbers import OverflowNumbers

__all__ = ["is_context_overflow", "sse_error_is_overflow"]

# Statuses under which a provider reports a too-long prompt. ``None`` stands for an SSE error
# event, which has no status of its own.
_OVERFLOW_STATUSES: frozenset[int | None] = frozenset({400, 413, 422, None})
# Some vLLM / llama.cpp builds answer 500 for an overflow; accepted only with specific wording.
_LENIENT_STATUSES: frozenset[int] = frozenset({500})

_OVERFLOW_CODES: frozenset[str] = frozenset(
    {"context_length_exceeded", "exceed_context_size_error", "context_window_exceeded"}
)
_NOT_OVERFLOW_CODES: frozenset[str] = frozenset(
    {"request_too_large", "string_above_max_length", "rate_limit_exceeded", "rate_limit_error", "insufficient_quota"}
)

_FLAGS = re.IGNORECASE

# Provider-specific wording: clear enough to trust even under a 500.
SPECIFIC_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"maximum context length", _FLAGS),  # OpenAI, vLLM, Mistral, OpenRouter
    re.compile(r"context[_ ]length[_ ]exceeded", _FLAGS),  # OpenAI / Groq code quoted in text
    re.compile(r"reduce the length of the messages", _FLAGS),  # OpenAI, Groq
    re.compile(r"prompt is too long", _FLAGS),  # Anthropic
    re.compile(r"input length and `?max_tokens`? exceed context limit", _FLAGS),  # Anthropic
    re.compile(r"exceeds the maximum number of tokens", _FLAGS),  # Gemini
    re.compile(r"exceeds the available context size", _FLAGS),  # llama.cpp
    re.compile(r"greater than the context length", _FLAGS),  # LM Studio
    re.compile(r"too large for model with .{0,80}?maximum context length", _FLAGS),  # Mistral
    re.compile(r"input is too long", _FLAGS),  # Bedrock
)
# Generic wording: trusted only under a 4xx status or in an SSE error event.
GENERIC_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"token limit exceeded", _FLAGS),
    re.compile(r"too many tokens", _FLAGS),
    re.compile(r"context window", _FLAGS),
)
# Wording that rules an overflow out even if other patterns match.
NEGATIVE_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"request body too large|request entity too large|maximum allowed number of bytes", _FLAGS),
    re.compile(r"string too long\. expected a string with maximum length", _FLAGS),
    re.compile(r"tokens per min(?:ute)?|\bTPM\b|rate limit", _FLAGS),
)

_MESSAGE_KEYS = ("message", "detail", "error")
_CODE_KEYS = ("code", "type")


def is_context_overflow(status: int | None, body: bytes | str | Mapping[str, Any] | None) -> bool:
    """Whether an upstream error response (``status``, ``body``) is a token context overflow.

    ``body`` is the raw or parsed error body; ``status`` is ``None`` for an SSE error event.
    """
    lenient = status in _LENIENT_STATUSES
    if status not in _OVERFLOW_STATUSES and not lenient:
        return False
    codes, texts = _signals(_parse(body))
    if codes & _NOT_OVERFLOW_CODES or any(p.search(t) for p in NEGATIVE_PATTERNS for t in texts):
        return False
    if codes & _OVERFLOW_CODES:
        return True
    patterns = SPECIFIC_PATTERNS if lenient else SPECIFIC_PATTERNS + GENERIC_PATTERNS
    return any(p.search(t) for p in patterns for t in texts)


def sse_error_is_overflow(event_data: bytes) -> bool:
    """Whether one SSE ``data:`` payload (the bytes after ``data: ``) is an overflow error event.

    Only error-shaped JSON objects count (an ``error`` member, or ``"type"``/``"object"`` equal to
    ``"error"``): an ordinary completion chunk that merely talks about context windows is not one.
    """
    parsed = _parse(event_data)
    if not any(_is_error_event(item) for item in _mappings(parsed)):
        return False
    return is_context_overflow(None, event_data)


def _parse(body: bytes | str | Mapping[str, Any] | None) -> object:
    """The body as JSON when it parses, else as text (``None`` when empty)."""
    if body is None or isinstance(body, Mapping):
        return body
    raw = body.encode("utf-8", "replace") if isinstance(body, str) else body
    if not raw.strip():
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace")


def _mappings(parsed: object) -> Iterator[Mapping[str, Any]]:
    """The error objects of a parsed body: the body itself, or each element of a JSON array."""
    if isinstance(parsed, Mapping):
        yield parsed
    elif isinstance(parsed, list):
        yield from (item for item in parsed if isinstance(item, Mapping))


def _is_error_event(item: Mapping[str, Any]) -> bool:
    return "error" in item or item.get("type") == "error" or item.get("object") == "error"


def _signals(parsed: object) -> tuple[frozenset[str], tuple[str, ...]]:
    """Lower-cased error codes/types, and the message texts, found in a parsed body."""
    if isinstance(parsed, str):
        return frozenset(), (parsed,)
    codes: set[str] = set()
    texts: list[str] = []
    for item in _mappings(parsed):
        _collect(item, codes, texts)
        nested = item.get("error")
        if isinstance(nested, Mapping):
            _collect(nested, codes, texts)
    return frozenset(codes), tuple(texts)


def _collect(obj: Mapping[str, Any], codes: set[str], texts: list[str]) -> None:
    for key in _CODE_KEYS:
        value = obj.get(key)
        if isinstance(value, str):
            codes.add(value.strip().lower())
    for key in _MESSAGE_KEYS:
        value = obj.get(key)
        if isinstance(value, str):
            texts.append(value)


@dataclass(frozen=True)
class Overflow:
    """The upstream answered that the prompt is too long, and nothing reached the client yet;
    ``numbers``: the limit and prompt size its error stated."""

    numbers: OverflowNumbers = OverflowNumbers()

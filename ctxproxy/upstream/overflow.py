"""Recognise upstream errors that mean "the prompt does not fit in the model's context window".

Pure functions, no I/O: the relay calls :func:`is_context_overflow` on an HTTP error response and
:func:`sse_error_is_overflow` on an SSE error event that arrived before any byte reached the client,
and recovers (compacts harder, retries once) only when they say yes.

Where the words are read. A plain-text body is read whole. In a JSON body (or each element of a
JSON array, as Gemini sends) the strings under ``message``, ``msg``, ``detail`` and ``error`` are
read (and ``raw``: OpenRouter quotes the provider's own error in ``error.metadata.raw``), and the
codes under ``code``, ``type`` and ``error_type``; the search goes on into nested ``error`` (also
``error.error``), ``errors``, ``detail`` (a FastAPI / LiteLLM string, object or list),
``response`` and ``metadata`` objects. That covers OpenAI ``{"error": {...}}``, ``{"error": "..."}``,
Anthropic ``{"type": "error", "error": {...}}``, AWS ``{"message": ...}``, Cohere ``{"message",
"error_type"}``, an OpenAI Responses ``response.failed`` event (``response.error``) and its
``{"type": "error", "code", "message"}`` event.

Families recognised (case-insensitive). Provider-specific wording (:data:`SPECIFIC_PATTERNS`),
trusted under 400 / 413 / 422, in an SSE error event, and under a 500 (vLLM, llama.cpp and Ollama
builds answer 500 for an overflow):

- "maximum context|prompt length|limit|size" — OpenAI, Azure, vLLM, DeepSeek, OpenRouter, Mistral,
  Fireworks, xAI ("maximum prompt length is N but the request contains M tokens");
- "context length exceeded" / "context window exceeded" (also as codes quoted in text, and
  LiteLLM's ``ContextWindowExceededError``); "reduce the length of the (input) messages" (OpenAI,
  Groq, Cerebras, vLLM);
- "prompt (is) too long" (Anthropic, Bedrock, Fireworks, Ollama), "input is too long for requested
  model" (Bedrock), "input length and max_tokens exceed context limit" (Anthropic);
- "exceeds the maximum number of tokens allowed" (Gemini / Vertex), "exceeds the available context
  size" (llama.cpp, Ollama), "greater than the context length", "context length of only N tokens",
  "context size has been exceeded" (LM Studio), "longer than … context|model length" and "too long
  to fit into the model" (vLLM, SGLang, Together), "current length is N while limit is M"
  (Cerebras), "prompt token count of N exceeds the limit of M" (GitHub Copilot), "exceeded model
  token limit" (Moonshot / Kimi), "exceeded max context length" (Ollama), "`inputs` tokens +
  `max_new_tokens` must be <= N" and "`inputs` must have less than N tokens" (TGI, Hugging Face,
  Together), "size limit exceeded by N tokens" (Cohere), "tokens exceed the configured limit"
  (OpenAI, Azure), "range of input length should be" (Alibaba DashScope).

Generic families (:data:`GENERIC_PATTERNS`), trusted only under 400 / 413 / 422 or in an SSE error
event: "exceed(s|ed) … context|token|input|prompt limit|window|size|length", "input|prompt (is) too
long|large", "input|prompt tokens … must be <= / less than", "length is N while limit is M",
"exceeds the configured limit of N tokens", "token limit", "too many tokens", "context window".

Codes: ``context_length_exceeded``, ``context_window_exceeded``, ``exceed_context_size_error``,
``model_context_window_exceeded``, ``model_max_prompt_tokens_exceeded``.

Never overflows, whatever else the body says (:data:`NEGATIVE_PATTERNS`, :data:`_NOT_OVERFLOW_CODES`
and the status policy): request size in bytes (413 ``request_too_large``, "Request Entity Too
Large", "payload too large"), OpenAI ``string_above_max_length``, rate limits (TPM / RPM / TPD,
"tokens per minute", "rate limit", "please wait before trying again"), quota, billing, credits and
token allowances per day or month,
llama.cpp's "increase the physical batch size", a completion limit alone
("max_tokens is too large … supports at most N completion tokens", "max_tokens: N > M, which is the
maximum allowed number of output tokens", "the maximum output length", "`max_new_tokens` must be
<= N"), content-policy refusals, and any status other than 400 / 413 / 422 / 500 (401 and 403
authentication, 404 model not found, 429, 5xx).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ctxproxy.upstream.overflow_numbers import OverflowNumbers

__all__ = ["is_context_overflow", "may_be_error_event", "sse_error_is_overflow"]

# Statuses under which a provider reports a too-long prompt. ``None`` stands for an SSE error
# event, which has no status of its own.
_OVERFLOW_STATUSES: frozenset[int | None] = frozenset({400, 413, 422, None})
# Some vLLM / llama.cpp / Ollama builds answer 500 for an overflow; accepted only with specific wording.
_LENIENT_STATUSES: frozenset[int] = frozenset({500})

_OVERFLOW_CODES: frozenset[str] = frozenset(
    {
        "context_length_exceeded",  # OpenAI, Azure, Groq, Cerebras, OpenAI Responses
        "context_window_exceeded",
        "exceed_context_size_error",  # llama.cpp
        "model_context_window_exceeded",  # Anthropic-compatible gateways
        "model_max_prompt_tokens_exceeded",  # GitHub Copilot
    }
)
_NOT_OVERFLOW_CODES: frozenset[str] = frozenset(
    {
        "request_too_large",  # Anthropic 413: the body's bytes
        "string_above_max_length",  # OpenAI: one string's characters
        "rate_limit_exceeded",
        "rate_limit_error",
        "rate_limit_reached_error",  # Moonshot / Kimi
        "insufficient_quota",
        "exceeded_current_quota_error",  # Moonshot / Kimi
        "billing_hard_limit_reached",
        "content_filter",
        "content_policy_violation",
    }
)

_FLAGS = re.IGNORECASE
_N = r"[\d,]+"  # a token count, perhaps with thousands separators

# Provider-specific wording: clear enough to trust even under a 500.
SPECIFIC_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"maximum (?:context|prompt) (?:length|limit|size)", _FLAGS),
    re.compile(r"context[_ ]?(?:length|window)[_ ]?exceeded", _FLAGS),
    re.compile(r"reduce the length of the (?:input )?messages", _FLAGS),
    re.compile(r"prompt (?:is )?too long", _FLAGS),
    re.compile(r"input is too long for (?:the )?requested model", _FLAGS),
    re.compile(r"input length and `?max_tokens`? exceed context limit", _FLAGS),
    re.compile(r"exceeds the maximum number of tokens allowed", _FLAGS),
    re.compile(r"exceeds the available context size", _FLAGS),
    re.compile(
        r"greater than the context length|context length of only [\d,]+ tokens|context size has been exceeded", _FLAGS
    ),
    re.compile(r"longer than\b.{0,40}?\b(?:context|model) length", _FLAGS),
    re.compile(r"too long to fit into the model", _FLAGS),
    re.compile(rf"current length is {_N} while limit is {_N}", _FLAGS),
    re.compile(rf"prompt token count of {_N} exceeds the limit of {_N}", _FLAGS),
    re.compile(r"exceeded model token limit", _FLAGS),
    re.compile(r"exceeded (?:the )?max(?:imum)? context length", _FLAGS),
    re.compile(r"`?inputs`? tokens \+ `?max_new_tokens`? must be <=", _FLAGS),
    re.compile(rf"`?inputs`? must have less than {_N} tokens", _FLAGS),
    re.compile(rf"size limit exceeded by {_N} tokens", _FLAGS),
    re.compile(r"tokens exceed the configured limit", _FLAGS),
    re.compile(r"range of input length should be", _FLAGS),
)
# Generic wording: trusted only under a 4xx status or in an SSE error event.
GENERIC_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"exceed(?:s|ed)?\b.{0,60}?\b(?:context|tokens?|input|prompt)[ _-](?:limit|window|size|length)\b", _FLAGS
    ),
    re.compile(r"\b(?:input|prompt) (?:is )?too (?:long|large)\b", _FLAGS),
    re.compile(r"\b(?:inputs?|prompt)`?[ _]tokens?\b[^.]{0,60}?must be (?:<=|less than)", _FLAGS),
    re.compile(rf"length is {_N} while limit is {_N}", _FLAGS),
    re.compile(rf"exceed(?:s|ed)? the configured limit of {_N} tokens", _FLAGS),
    re.compile(r"\btoken limit\b", _FLAGS),
    re.compile(r"too many (?:input |prompt )?tokens", _FLAGS),
    re.compile(r"context window", _FLAGS),
)
# Wording that rules an overflow out even if other patterns match.
NEGATIVE_PATTERNS: tuple[re.Pattern[str], ...] = (
    # the request's size in bytes, not in tokens
    re.compile(
        r"request body too large|entity too large|payload too large|payload size exceeds"
        r"|maximum allowed number of bytes|\b\d[\d,]*\s*bytes\b",
        _FLAGS,
    ),
    # one string's characters (OpenAI string_above_max_length)
    re.compile(r"string too long\. expected a string with maximum length", _FLAGS),
    # throughput: a rate limit counted in tokens is not the context window
    re.compile(
        r"tokens per (?:min|minute|hour|day)\b|\b(?:TPM|RPM|TPD|RPD)\b|\brate[ _]?limit|requests per"
        r"|wait before trying again|try again later|try again in \d",
        _FLAGS,
    ),
    # quota, billing, credits, a token allowance per period
    re.compile(
        r"quota|billing|\bcredits?\b|can only afford|insufficient[ _]balance"
        r"|(?:daily|weekly|monthly) (?:token )?limit|tokens? (?:limit )?(?:per|for the) (?:day|month)|\btoday\b",
        _FLAGS,
    ),
    # the completion alone asks for too much (max_tokens), whatever the prompt's size
    re.compile(
        r"supports at most [\d,]+ completion tokens|maximum allowed number of output tokens"
        r"|maximum output (?:length|tokens?)|output token limit|maximum tokens you requested exceeds"
        r"|valid range of max_tokens|(?:^|[:.]\s*)`?max_(?:new_|completion_)?tokens`? (?:must be|is too large)",
        _FLAGS,
    ),
    # a server's batch setting (llama.cpp), not the model's window
    re.compile(r"physical batch size", _FLAGS),
)

_MESSAGE_KEYS = ("message", "Message", "msg", "detail", "error", "raw")
_CODE_KEYS = ("code", "type", "error_type")
_NESTED_KEYS = ("error", "errors", "detail", "response", "metadata")
_ERROR_EVENT_TYPES = frozenset({"error", "response.failed"})
_MAX_DEPTH = 6  # nesting read (error.error, response.error, detail[0], ...)
_MAX_ITEMS = 32  # elements read from one JSON array
_MAX_TEXT = 8_192  # characters of each string searched (error messages are short)


def is_context_overflow(status: int | None, body: bytes | str | Mapping[str, Any] | None) -> bool:
    """Whether an upstream error response (``status``, ``body``) is a token context overflow.

    ``body`` is the raw or parsed error body; ``status`` is ``None`` for an SSE error event.
    """
    lenient = status in _LENIENT_STATUSES
    if status not in _OVERFLOW_STATUSES and not lenient:
        return False
    return _says_overflow(_parse(body), lenient)


def sse_error_is_overflow(event_data: bytes) -> bool:
    """Whether one SSE ``data:`` payload (the bytes after ``data: ``) is an overflow error event.

    Only error-shaped JSON objects count: a non-empty ``error`` member, ``"type"`` equal to
    ``"error"`` (Anthropic, OpenAI Responses) or ``"response.failed"`` (OpenAI Responses), or
    ``"object"`` equal to ``"error"`` (vLLM). An ordinary chunk that merely talks about context
    windows is not one.
    """
    if not may_be_error_event(event_data):
        return False
    parsed = _parse(event_data)
    if not any(_is_error_event(item) for item in _objects(parsed)):
        return False
    return _says_overflow(parsed, lenient=False)


def may_be_error_event(data: bytes) -> bool:
    """False only for bytes that cannot hold an error-shaped event (``sse_error_is_overflow``): each
    of its marks (an ``error`` member; a ``type`` or ``object`` that is ``error`` or
    ``response.failed``) spells ``error`` or ``failed``, unless a ``\\u`` escape spells it. Reading an
    ordinary event is then a substring search, not a parse."""
    return b"error" in data or b"failed" in data or b"\\u" in data


def _says_overflow(parsed: object, lenient: bool) -> bool:
    codes, texts = _signals(parsed)
    if codes & _NOT_OVERFLOW_CODES or any(p.search(t) for p in NEGATIVE_PATTERNS for t in texts):
        return False
    if codes & _OVERFLOW_CODES:
        return True
    patterns = SPECIFIC_PATTERNS if lenient else SPECIFIC_PATTERNS + GENERIC_PATTERNS
    return any(p.search(t) for p in patterns for t in texts)


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


def _objects(parsed: object) -> Iterator[Mapping[str, Any]]:
    """The top-level error objects of a parsed body: the body itself, or each element of an array."""
    if isinstance(parsed, Mapping):
        yield parsed
    elif isinstance(parsed, list):
        yield from (item for item in parsed[:_MAX_ITEMS] if isinstance(item, Mapping))


def _is_error_event(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")  # any JSON value: a list or an object is no event type (and is unhashable)
    return (
        bool(item.get("error"))
        or (isinstance(kind, str) and kind in _ERROR_EVENT_TYPES)
        or item.get("object") == "error"
    )


def _signals(parsed: object) -> tuple[frozenset[str], tuple[str, ...]]:
    """Lower-cased error codes/types, and the message texts (each cut to :data:`_MAX_TEXT`)."""
    if isinstance(parsed, str):
        return frozenset(), (parsed[:_MAX_TEXT],)
    codes: set[str] = set()
    texts: list[str] = []
    _collect(parsed, codes, texts, depth=0)
    return frozenset(codes), tuple(texts)


def _collect(value: object, codes: set[str], texts: list[str], depth: int) -> None:
    """Codes and texts of ``value`` and of the error objects nested in it, to :data:`_MAX_DEPTH`."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, list):
        for item in value[:_MAX_ITEMS]:
            _collect(item, codes, texts, depth + 1)
        return
    if not isinstance(value, Mapping):
        return
    for key in _CODE_KEYS:
        code = value.get(key)
        if isinstance(code, str):
            codes.add(code.strip().lower())
    for key in _MESSAGE_KEYS:
        text = value.get(key)
        if isinstance(text, str):
            texts.append(text[:_MAX_TEXT])
    for key in _NESTED_KEYS:
        nested = value.get(key)
        if isinstance(nested, Mapping | list):
            _collect(nested, codes, texts, depth + 1)


@dataclass(frozen=True)
class Overflow:
    """The upstream answered that the prompt is too long, and nothing reached the client yet;
    ``numbers``: the limit and prompt size its error stated."""

    numbers: OverflowNumbers = OverflowNumbers()

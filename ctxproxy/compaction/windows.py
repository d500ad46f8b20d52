"""Context windows: which window a request's model has, and what the request reserves.

Precedence, first that gives a window: the tenant's ``[models."<glob>"]`` entries (the first
matching pattern that sets one: ``configured``; a pattern may set only a price), then the window
the client asked for (``window_hints``: a bracketed size on the model's name, a size ending it, a
protocol's header; the smallest when several do), then the built-in table; a model nothing
matches gets the tenant's ``default_context_window`` (the chat handler logs
``model.window_unknown`` once per tenant and model). The operator knows the upstream, so the
tenant's word beats the client's; the client knows what it enabled (a beta, a variant), so its
word beats the table's. A window learned from the upstream then only ever lowers what this gives
(``learned``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fnmatch import fnmatchcase, translate
from typing import TypeVar

import structlog

from ctxproxy.cache import ByteLRU, CachePool, json_size
from ctxproxy.compaction.window_hints import WindowHint, hinted_name, name_hint, narrowest, without_size_suffix
from ctxproxy.config.models import ModelConfig, TenantConfig

log = structlog.get_logger(__name__)
T = TypeVar("T")

# (pattern, tokens), most specific first. Provider prefixes ("openai/") are stripped first.
BUILTIN_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4o*", 128_000),
    ("chatgpt-4o*", 128_000),
    ("gpt-4.1*", 1_047_576),
    ("gpt-4.5*", 128_000),
    ("gpt-4-turbo*", 128_000),
    ("gpt-4-32k*", 32_768),
    ("gpt-4*", 8_192),
    ("gpt-3.5-turbo-instruct*", 4_096),
    ("gpt-3.5*", 16_385),
    ("gpt-5*", 400_000),
    ("o1-mini*", 128_000),
    ("o1*", 200_000),
    ("o3*", 200_000),
    ("o4*", 200_000),
    ("claude*", 200_000),
    ("gemini-1.0*", 32_760),
    ("gemini*", 1_048_576),
    ("*llama-3.1*", 131_072),
    ("*llama-3.2*", 131_072),
    ("*llama-3.3*", 131_072),
    ("*llama-4*", 1_000_000),
    ("*llama-3*", 8_192),
    ("qwen3*", 131_072),
    ("qwen2.5*", 131_072),
    ("qwen*", 32_768),
    ("mistral-large*", 131_072),
    ("mistral-small*", 131_072),
    ("codestral*", 256_000),
    ("mistral*", 32_768),
    ("mixtral*", 32_768),
    ("deepseek*", 128_000),
    ("grok*", 131_072),
)

# The table as one expression: its first alternative that matches names the pattern (``builtin_window``).
_BUILTIN = re.compile("|".join(f"(?P<p{i}>{translate(pattern)})" for i, (pattern, _) in enumerate(BUILTIN_WINDOWS)))


def configured(
    model: str | None, tenant: TenantConfig, value: Callable[[ModelConfig], T | None]
) -> tuple[T, str] | None:
    """``value`` of the first of the tenant's ``[models."<glob>"]`` patterns that matches
    ``model`` and sets it, and that pattern; None when none does."""
    if not tenant.models:
        return None
    name = model_name(model)
    for pattern, config in tenant.models.items():
        found = value(config)
        if found is not None and fnmatchcase(name, pattern.lower()):
            return found, pattern
    return None


def model_name(model: str | None) -> str:
    """What patterns and prices match: lower case, without a provider prefix ("openai/") and
    without a bracketed size ("[1m]": a hint, ``window_hints``)."""
    return without_size_suffix((model or "").lower().rsplit("/", 1)[-1])


def known_window(model: str | None, tenant: TenantConfig, asked: WindowHint | None = None) -> int | None:
    """The window from the tenant's ``[models]``, the client's hints (``asked``: what a header
    asked for) or the built-in table; None if none knows."""
    found = window_source(model, tenant, asked)
    return None if found is None else found[0]


def window_source(model: str | None, tenant: TenantConfig, asked: WindowHint | None = None) -> tuple[int, str] | None:
    """``known_window`` and where it comes from: ``[models."<pattern>"]``, the hint's source
    (``anthropic-beta context-1m-…``, ``model name "[1m]"``) or ``built-in <pattern>``."""
    found = configured(model, tenant, lambda config: config.context_window)
    if found is not None:
        return found[0], f'[models."{found[1]}"]'
    hint = narrowest(asked, name_hint(model))
    if hint is not None:
        return hint.tokens, hint.source
    return builtin_window(model_name(model))


def builtin_window(name: str) -> tuple[int, str] | None:
    """The window of the first ``BUILTIN_WINDOWS`` pattern ``name`` matches, and its source: one
    match of a regular expression (its alternatives tried in the table's order) instead of a
    ``fnmatchcase`` per pattern."""
    found = _BUILTIN.match(name)
    if found is None or found.lastgroup is None:
        return None
    pattern, tokens = BUILTIN_WINDOWS[int(found.lastgroup[1:])]
    return tokens, f"built-in {pattern}"


def context_window(model: str | None, tenant: TenantConfig, asked: WindowHint | None = None) -> int:
    found = known_window(model, tenant, asked)
    return tenant.default_context_window if found is None else found


def learned_as(model: str | None, tenant: TenantConfig, asked: WindowHint | None) -> str | None:
    """The model name what is learned of ``model`` is kept under (``learning``): its own, unless
    a header's hint gives it its window; then the name with that window as a bracketed suffix
    (``claude-opus-4-8[1m]``), whose window ``context_window`` finds from the name alone. So a
    model asked for at 1M and the same model at its usual size learn apart, and a learned record
    names the window it was learned under."""
    if asked is None or configured(model, tenant, lambda config: config.context_window) is not None:
        return model
    return hinted_name(model, asked)


class UnknownModels:
    """Logs, once per tenant and model, that a model got the default window (once per
    pair held in its byte-bounded memory: a pair forgotten is logged again)."""

    def __init__(self, cache: ByteLRU[tuple[str, str | None], bool] | None = None) -> None:
        self._seen = cache if cache is not None else CachePool().lru("unknown_models")

    @property
    def nbytes(self) -> int:
        return self._seen.nbytes

    def note(self, tenant: TenantConfig, model: str | None) -> None:
        pair = (tenant.name, model)
        if self._seen.get(pair) is not None:
            return
        self._seen.put(pair, True, json_size(pair))
        log.info(
            "model.window_unknown",
            tenant=tenant.name,
            model=model,
            context_window=tenant.default_context_window,
            fix='add [models."<pattern>"] context_window to the tenant file',
        )

"""Context windows: which window a request's model has, and what the request reserves.

Tenant ``[models."<glob>"]`` entries win over the built-in table; the first matching pattern
of each applies; a model nothing matches gets the tenant's ``default_context_window``.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from proxy.config.models import TenantConfig
from proxy.strategies.base import Window

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
    ("gemini*", 1_048_576),
)


def context_window(model: str | None, tenant: TenantConfig) -> int:
    name = (model or "").lower().rsplit("/", 1)[-1]
    for pattern, config in tenant.models.items():
        if fnmatchcase(name, pattern.lower()):
            return config.context_window
    for pattern, tokens in BUILTIN_WINDOWS:
        if fnmatchcase(name, pattern):
            return tokens
    return tenant.default_context_window


def reserved_output(body: Mapping[str, Any]) -> int:
    """What the request asks to keep free for the answer (``max_completion_tokens`` first)."""
    for field in ("max_completion_tokens", "max_tokens"):
        value = body.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def window_for(model: str | None, body: Mapping[str, Any], tenant: TenantConfig) -> Window:
    return Window(context_window(model, tenant), reserved_output(body))

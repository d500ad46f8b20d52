"""What ``ctxproxy config check`` prints about a valid directory besides "OK": its warnings,
each tenant's context windows with where they come from, so that ``default_context_window``
versus the built-in table is never a surprise, the window hints clients may send, and the plugins
it loaded."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import TextIO

from ctxproxy.compaction.windows import BUILTIN_WINDOWS, window_source
from ctxproxy.config import Config, ConfigIssue, TenantConfig

BUILTIN_DEFAULT_WINDOW = TenantConfig.model_fields["default_context_window"].default
WIDTH = 100
FIRST_MATCH = (
    "first match wins: the tenant's [models] patterns, the window the client asks for (client hints, below), "
    "the built-in table, then default_context_window"
)
CLIENT_HINTS = (
    "a model name ending [<n>k] or [<n>m] (claude-sonnet-4-5[1m]), or -<n>k or -<n>m up to -10m "
    "(moonshot-v1-128k, qwen2.5-7b-instruct-1m); Messages clients' anthropic-beta context-1m-<date>: "
    "1000000; the smallest when several apply; a window the upstream states still lowers it"
)


def print_warnings(warnings: Iterable[ConfigIssue], err: TextIO) -> None:
    for warning in warnings:
        print(f"warning: {warning}", file=err)


def print_windows(config: Config, out: TextIO) -> None:
    print(f"windows ({FIRST_MATCH}):", file=out)
    for name in sorted(config.tenants):
        print(f"  {name}: {'; '.join(tenant_windows(config.tenants[name]))}", file=out)
    entries = [f"{pattern} {tokens}," for pattern, tokens in BUILTIN_WINDOWS]
    print("  built-in table:", file=out)
    line = "   "
    for entry in entries:
        if len(line) + len(entry) >= WIDTH:
            print(line, file=out)
            line = "   "
        line += " " + entry
    print(line.rstrip(","), file=out)
    print(textwrap.fill(CLIENT_HINTS, WIDTH, initial_indent="  client hints: ", subsequent_indent="    "), file=out)


def print_plugins(config: Config, out: TextIO) -> None:
    """Each plugin loaded, by entry-point group (the ones skipped are among the warnings)."""
    loaded = config.plugins.loaded
    if not loaded:
        print("plugins: none loaded", file=out)
        return
    print(f"plugins ({len(loaded)} loaded):", file=out)
    for info in loaded:
        print(f"  {info.group}: {info.name} ({info.source})", file=out)


def tenant_windows(tenant: TenantConfig) -> list[str]:
    """Each ``[models]`` pattern's window, the summary model's, and the one for every other model."""
    models = tenant.models.items()
    parts = [f'[models."{pattern}"] {model.context_window}' for pattern, model in models if model.context_window]
    summary_model = tenant.compaction.summary_model
    if summary_model:
        parts.append(f"summary model {summary_model} {_summary_window(tenant, summary_model)}")
    other = f"any other model {tenant.default_context_window} (default_context_window"
    if tenant.default_context_window != BUILTIN_DEFAULT_WINDOW:
        other += "; a model the built-in table knows keeps its own window"
    return [*parts, other + ")"]


def _summary_window(tenant: TenantConfig, model: str) -> str:
    if tenant.compaction.summary_context_window:
        return f"{tenant.compaction.summary_context_window} (summary_context_window)"
    found = window_source(model, tenant)
    window, source = (tenant.default_context_window, "default_context_window") if found is None else found
    return f"{window} ({source})"

"""Warnings: a config directory that loads, but holds something that has no effect, or numbers
that leave a strategy so little room that it would compact on (nearly) every turn.

Nothing here refuses a directory (a proxy still starts); ``ctxproxy config check`` prints them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ctxproxy.config.issues import ConfigIssue
from ctxproxy.config.models import TenantConfig
from ctxproxy.plugins import Plugins
from ctxproxy.strategies.base import Conversation, StrategyOptions, Window
from ctxproxy.strategies.registry import StrategyRegistry


def stray_tenant_files(tenant_dir: Path) -> list[ConfigIssue]:
    """Entries of ``tenants/`` that are not read: only ``*.toml`` files are tenants (hidden
    files, an editor's or a VCS's, are left alone)."""
    if not tenant_dir.is_dir():
        return []
    return [
        ConfigIssue(f"tenants/{entry.name}", None, "not read: only tenants/*.toml files are tenants")
        for entry in sorted(tenant_dir.iterdir())
        if not entry.name.startswith(".") and not (entry.suffix == ".toml" and entry.is_file())
    ]


def plugin_warnings(plugins: Plugins) -> list[ConfigIssue]:
    """Installed plugins that did not load, and names ``[plugins] enabled`` lists that none has."""
    skipped = [
        ConfigIssue("proxy.toml", "plugins", f"plugin {s.name!r} ({s.group}) did not load and is skipped: {s.error}")
        for s in plugins.skipped
    ]
    unknown = [
        ConfigIssue("proxy.toml", "plugins.enabled", f"no installed plugin is named {name!r}")
        for name in plugins.unknown
    ]
    return skipped + unknown


def unused_strategy_tables(
    raw: Mapping[str, Any], tenant: TenantConfig, file: str, registry: StrategyRegistry
) -> list[ConfigIssue]:
    """The tenant file's ``[compaction.<name>]`` tables for a strategy other than the tenant's."""
    strategy = tenant.compaction.strategy
    return [
        ConfigIssue(file, f"compaction.{name}", f"not used: this tenant's strategy is {strategy!r}, not {name!r}")
        for name in _tables(raw, registry)
        if name != strategy
    ]


def unused_default_tables(
    raw_defaults: Mapping[str, Any], tenants: Iterable[TenantConfig], registry: StrategyRegistry
) -> list[ConfigIssue]:
    """``[defaults.compaction.<name>]`` tables for a strategy no tenant uses."""
    in_use = {tenant.compaction.strategy for tenant in tenants}
    return [
        ConfigIssue("proxy.toml", f"defaults.compaction.{name}", f"not used: no tenant's strategy is {name!r}")
        for name in _tables(raw_defaults, registry)
        if name not in in_use
    ]


def _tables(raw: Mapping[str, Any], registry: StrategyRegistry) -> list[str]:
    compaction = raw.get("compaction")
    return [name for name in registry if isinstance(compaction, dict) and name in compaction]


ANSWER_SHARE = 0.125  # a typical request's max_tokens, as a share of its window


def crowded_compaction(tenant: TenantConfig, file: str) -> list[ConfigIssue]:
    """What in the tenant's strategy options would make it compact on (nearly) every turn
    (``StrategyOptions.crowding``), at the window of each model its ``[models]`` configure and at
    its ``default_context_window``, for a request whose ``max_tokens`` is an eighth of the window
    and with the room its injected memories take."""
    config = tenant.compaction
    options = config.options.get(config.strategy)
    if not isinstance(options, StrategyOptions):
        return []
    memories = tenant.memory.injection_reserve(user=False, scope=False)
    windows = {tenant.default_context_window, *(m.context_window for m in tenant.models.values() if m.context_window)}
    reasons: list[str] = []
    for window in sorted(windows):
        reserve = memories + int(ANSWER_SHARE * window)
        budget = Window(window, reserve).budget
        blank = Conversation((), (), 0, Window(window, reserve), optimise=config.optimise)
        reason = options.crowding(replace(blank, summary_budget=config.summary_budget(budget)))
        if reason is not None and reason not in reasons:
            reasons.append(reason)
    key = f"compaction.{config.strategy}"
    return [ConfigIssue(file, key, f"too little room between compactions, {reason}") for reason in reasons]


def tool_outputs_without_tools(tenant: TenantConfig, file: str) -> list[ConfigIssue]:
    """Tool outputs are rewritten only where ``ctxproxy_retrieve`` can bring them back: with
    ``[tools] enabled = false`` an explicit ``[compaction.tool_outputs] enabled = true`` does nothing."""
    if tenant.compaction.tool_outputs.enabled and not tenant.tools.enabled:
        reason = (
            "does nothing while [tools] enabled = false: no result is rewritten that ctxproxy_retrieve cannot return"
        )
        return [ConfigIssue(file, "compaction.tool_outputs.enabled", reason)]
    return []

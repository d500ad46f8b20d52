"""Plugins: strategies, summarisers and hooks that installed packages add through entry points
(``spec`` says what each provides and what hooks are told; ``loading`` finds and loads them;
``hooks`` runs the hooks; ``isolation`` keeps a plugin's failure from failing a request)."""

from ctxproxy.plugins.hooks import HookRunner
from ctxproxy.plugins.loading import BUILTIN_SUMMARIZERS, PluginInfo, Plugins, Skipped, load_plugins, log_plugins
from ctxproxy.plugins.spec import CompactedEvent, CompactEvent, CompactionEvent, ForkEvent, UseSummary, Veto

__all__ = [
    "BUILTIN_SUMMARIZERS",
    "CompactEvent",
    "CompactedEvent",
    "CompactionEvent",
    "ForkEvent",
    "HookRunner",
    "PluginInfo",
    "Plugins",
    "Skipped",
    "UseSummary",
    "Veto",
    "load_plugins",
    "log_plugins",
]

"""Finding and loading the installed plugins, once, when the proxy starts (and in ``config check``).

``load_plugins`` reads the three entry-point groups (``ctxproxy.plugins.spec``) through
``importlib.metadata``, keeps those ``[plugins] enabled`` lists (all, without the key), and
returns one ``Plugins`` object: the strategy registry (built-ins and plugin strategies), the
plugin summarisers by name, the hook runner, and what was loaded or skipped. Nothing is kept in
module state; the app holds the object (``ctxproxy.services.PLUGINS``).

A plugin strategy is registered guarded (``ctxproxy.plugins.guarded``). A plugin that fails to
import, to instantiate, or to be what its group needs (a strategy class whose ``name`` is the
entry point's, a summariser with ``summarize``, a hooks object with at least one hook), or whose
name is taken, is skipped and listed in ``skipped`` with the error's
type or the reason; it never stops the proxy. Names ``enabled`` lists that no installed plugin
has are listed in ``unknown``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import structlog

from ctxproxy.plugins.guarded import guarded_strategy
from ctxproxy.plugins.hooks import Hook, HookRunner
from ctxproxy.plugins.spec import GROUPS, HOOK_NAMES, HOOKS, STRATEGIES, SUMMARIZERS, HookName
from ctxproxy.strategies.base import StrategyOptions
from ctxproxy.strategies.registry import StrategyRegistry, builtin_registry

log = structlog.get_logger(__name__)
BUILTIN_SUMMARIZERS = ("llm", "extractive")


@dataclass(frozen=True)
class PluginInfo:
    group: str
    name: str
    source: str  # the distribution and its version, else the entry point's target


@dataclass(frozen=True)
class Skipped:
    group: str
    name: str
    error: str  # the exception's type name, or why the object does not fit its group


@dataclass(frozen=True)
class Plugins:
    strategies: StrategyRegistry = field(default_factory=builtin_registry)
    summarizers: Mapping[str, Any] = field(default_factory=dict)  # name → a Summarizer
    hooks: HookRunner = field(default_factory=HookRunner)
    loaded: tuple[PluginInfo, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    unknown: tuple[str, ...] = ()  # names [plugins] enabled lists that are not installed

    @property
    def summarizer_names(self) -> list[str]:
        return [*BUILTIN_SUMMARIZERS, *sorted(self.summarizers)]


class _Loader:
    """What ``load_plugins`` gathers, one entry point at a time."""

    def __init__(self) -> None:
        self.registry = builtin_registry()
        self.summarizers: dict[str, Any] = {}
        self.hooks: dict[HookName, list[Hook]] = {}

    def strategy(self, name: str, obj: Any) -> str | None:
        if not (isinstance(obj, type) and callable(getattr(obj, "plan", None))):
            return "not a strategy class (name, options_model, plan)"
        options = getattr(obj, "options_model", None)
        if not (isinstance(options, type) and issubclass(options, StrategyOptions)):
            return "its options_model is not a StrategyOptions subclass"
        if getattr(obj, "name", None) != name:
            return f"its name {getattr(obj, 'name', None)!r} is not the entry point's"
        if name in self.registry:
            return "the name is taken"
        try:
            self.registry.register(guarded_strategy(obj))
        except ValueError:
            return "one of its block kinds is taken"
        return None

    def summarizer(self, name: str, obj: Any) -> str | None:
        if name in BUILTIN_SUMMARIZERS or name in self.summarizers:
            return "the name is taken"
        made = obj() if isinstance(obj, type) else obj
        if not callable(getattr(made, "summarize", None)):
            return "not a summariser (summarize)"
        self.summarizers[name] = made
        return None

    def hooks_of(self, name: str, obj: Any) -> str | None:
        if any(hook.plugin == name for hooks in self.hooks.values() for hook in hooks):
            return "the name is taken"
        made = obj() if isinstance(obj, type) else obj
        found = [(hook, getattr(made, hook, None)) for hook in HOOK_NAMES]
        calls = [(hook, call) for hook, call in found if callable(call)]
        if not calls:
            return f"no hook ({', '.join(HOOK_NAMES)})"
        for hook, call in calls:
            self.hooks.setdefault(hook, []).append(Hook(name, call))
        return None


def load_plugins(enabled: Collection[str] | None = None, hook_timeout: float = 2.0) -> Plugins:
    """Every installed plugin (only those ``enabled`` names, when given), loaded (module docstring)."""
    loader = _Loader()
    take: Mapping[str, Callable[[str, Any], str | None]] = {
        STRATEGIES: loader.strategy,
        SUMMARIZERS: loader.summarizer,
        HOOKS: loader.hooks_of,
    }
    loaded: list[PluginInfo] = []
    skipped: list[Skipped] = []
    installed: set[str] = set()
    found = entry_points()  # one scan of the installed distributions for all three groups
    for group in GROUPS:
        for ep in sorted(found.select(group=group), key=lambda e: e.name):
            installed.add(ep.name)
            if enabled is not None and ep.name not in enabled:
                continue
            try:
                problem = take[group](ep.name, ep.load())
            except (Exception, SystemExit) as exc:  # a plugin's import or constructor
                problem = type(exc).__name__
            if problem is None:
                loaded.append(PluginInfo(group, ep.name, _source(ep)))
            else:
                skipped.append(Skipped(group, ep.name, problem))
    unknown = tuple(sorted(set(enabled or ()) - installed))
    hooks = HookRunner(loader.hooks, hook_timeout)
    return Plugins(loader.registry, loader.summarizers, hooks, tuple(loaded), tuple(skipped), unknown)


def log_plugins(plugins: Plugins) -> None:
    """One line per plugin loaded (``plugin.loaded``) or skipped (``plugin.skipped``), and per
    enabled name not installed (``plugin.not_installed``): when the app starts."""
    for info in plugins.loaded:
        log.info("plugin.loaded", group=info.group, plugin=info.name, source=info.source)
    for skipped in plugins.skipped:
        log.error("plugin.skipped", group=skipped.group, plugin=skipped.name, error=skipped.error)
    for name in plugins.unknown:
        log.warning("plugin.not_installed", plugin=name)


def _source(ep: EntryPoint) -> str:
    dist = ep.dist
    return f"{dist.name} {dist.version}" if dist is not None else ep.value

"""Read a config directory into a validated ``Config``, or report every problem at once.

Layout::

    DIR/proxy.toml          [server] [store] [tokens] and [defaults] (tenant-shaped)
    DIR/tenants/<name>.toml one file per tenant, merged over [defaults]

Precedence, lowest first: built-in defaults < ``proxy.toml [defaults]`` < the tenant file. Two
built-in defaults depend on the tenant's strategy: ``[memory] enabled`` and ``layered`` (its
``StrategyTraits``), filled in after merging, so either file may still set them.
Tables merge key by key; lists and scalars are replaced. ``${VAR}`` is substituted in each
file before merging, so an error names the file the variable appears in.

Both parts are required: a missing or unreadable ``proxy.toml`` or a directory without any
tenant file is an error, never a silent fall-back to built-in defaults (an *empty*
``proxy.toml`` is fine: it means all defaults).

Every problem becomes a ``ConfigIssue(file, key, reason)`` (``issues``: with the nearest valid
key for a misspelt one, and a number written in quotes refused); ``load_config`` raises one
``ConfigError`` holding all of them, so an operator fixes a directory in one pass. What loads
but has no effect (``lint``: a strategy table no tenant runs, a file ``tenants/`` does not read)
is a warning, kept in ``Config.warnings``; so are a strategy's numbers that would make it compact
on (nearly) every turn at a window the tenant configures.

Plugins (``ctxproxy.plugins``) are loaded once, as ``proxy.toml``'s ``[plugins]`` says, before the
tenants are validated: a tenant may name a plugin's strategy (with its options table) or
summariser. A reload passes the plugins already loaded (``[plugins]`` takes effect on restart).
A plugin that did not load, or an enabled name no installed plugin has, is a warning.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxproxy.config.interpolate import InterpolationError, interpolate
from ctxproxy.config.issues import ConfigError, ConfigIssue, unknown_choice, validate
from ctxproxy.config.lint import (
    crowded_compaction,
    plugin_warnings,
    stray_tenant_files,
    tool_outputs_without_tools,
    unused_default_tables,
    unused_strategy_tables,
)
from ctxproxy.config.models import ProxySettings, TenantConfig
from ctxproxy.plugins import Plugins, load_plugins
from ctxproxy.strategies.base import StrategyOptions
from ctxproxy.strategies.registry import StrategyRegistry
from ctxproxy.strategies.traits import traits_of

__all__ = ["Config", "ConfigError", "ConfigIssue", "key_fingerprint", "load_config"]
TENANT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
PROXY_TOML_MISSING = "file not found; create it (an empty proxy.toml means all defaults)"
METRICS_AUTH_WITHOUT_KEY = "needs [admin] api_key, the key /metrics then asks for (or set metrics_auth = false)"
NO_TENANTS = "no tenant files; add at least one tenants/<name>.toml (tenants/default.toml serves /v1/...)"


def key_fingerprint(key: str) -> str:
    """Proxy keys are looked up by hash, so the secret itself is never a dict key or log field."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Config:
    directory: Path
    settings: ProxySettings
    tenants: Mapping[str, TenantConfig]
    tenant_by_key: Mapping[str, str] = field(default_factory=dict)  # key fingerprint → tenant
    warnings: tuple[ConfigIssue, ...] = ()  # nothing refused, but probably not what was meant
    plugins: Plugins = field(default_factory=Plugins)  # loaded once, per proxy.toml's [plugins]


def load_config(
    directory: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    plugins: Plugins | None = None,
) -> Config:
    """The config in ``directory``; ``plugins``: those already loaded (a reload), else loaded
    now as its ``[plugins]`` says."""
    env = os.environ if env is None else env
    root = Path(directory)
    issues: list[ConfigIssue] = []
    if not root.is_dir():
        raise ConfigError([ConfigIssue(str(root), None, "config directory does not exist")])

    raw_proxy = _read_toml(root / "proxy.toml", env, issues, missing=PROXY_TOML_MISSING)
    proxy_readable = not issues
    raw_defaults = raw_proxy.pop("defaults", {})
    settings = validate(ProxySettings, raw_proxy, "proxy.toml", "", issues) or ProxySettings()
    server = settings.server
    if server.metrics and server.metrics_auth and settings.admin.api_key is None:
        issues.append(ConfigIssue("proxy.toml", "server.metrics_auth", METRICS_AUTH_WITHOUT_KEY))
    if plugins is None:
        plugins = load_plugins(settings.plugins.enabled, settings.plugins.hook_timeout)
    if not isinstance(raw_defaults, dict):
        issues.append(ConfigIssue("proxy.toml", "defaults", "must be a table"))
    defaults_ok = proxy_readable and isinstance(raw_defaults, dict) and _valid_defaults(raw_defaults, plugins, issues)

    tenant_dir = root / "tenants"
    registry = plugins.strategies
    warnings = plugin_warnings(plugins) + stray_tenant_files(tenant_dir)
    raw_tenants = _read_tenants(tenant_dir, env, issues)
    tenants: dict[str, TenantConfig] = {}
    for name, raw in raw_tenants.items() if defaults_ok else ():
        # (over broken defaults, validating the tenants would only repeat their errors)
        rel = f"tenants/{name}.toml"
        merged = _with_strategy_options(_deep_merge(raw_defaults, raw), plugins, rel, "", issues)
        merged = _with_memory_defaults(merged, registry)
        tenant = validate(TenantConfig, {**merged, "name": name}, rel, "", issues, {"compaction": registry})
        if tenant is not None:
            tenants[name] = tenant
            warnings += unused_strategy_tables(raw, tenant, rel, registry) + crowded_compaction(tenant, rel)
            warnings += tool_outputs_without_tools(tenant, rel)
    if defaults_ok:
        warnings += unused_default_tables(raw_defaults, tenants.values(), registry)

    tenant_by_key = _index_keys(tenants, issues)
    if issues:
        raise ConfigError(issues, warnings)
    return Config(root, settings, tenants, tenant_by_key, tuple(warnings), plugins)


def _valid_defaults(raw_defaults: Mapping[str, Any], plugins: Plugins, issues: list[ConfigIssue]) -> bool:
    """``[defaults]`` is tenant-shaped, its strategy tables included."""
    before = len(issues)
    moved = _with_strategy_options(raw_defaults, plugins, "proxy.toml", "defaults", issues)
    tables = {"compaction": plugins.strategies}
    validate(TenantConfig, {**moved, "name": "defaults"}, "proxy.toml", "defaults", issues, tables)
    return len(issues) == before


def _read_tenants(tenant_dir: Path, env: Mapping[str, str], issues: list[ConfigIssue]) -> dict[str, dict[str, Any]]:
    """Every readable ``tenants/<name>.toml`` with a valid name, by name."""
    files = sorted(tenant_dir.glob("*.toml")) if tenant_dir.is_dir() else []
    if not files:
        issues.append(ConfigIssue("tenants/", None, NO_TENANTS))
    found: dict[str, dict[str, Any]] = {}
    for path in files:
        rel = f"tenants/{path.name}"
        if not TENANT_NAME.match(path.stem):
            issues.append(ConfigIssue(rel, None, "tenant file names must be lower-case letters, digits, - and _"))
            continue
        before = len(issues)
        raw = _read_toml(path, env, issues, missing="file not found", rel=rel)
        if len(issues) > before:
            continue
        if "name" in raw:
            issues.append(ConfigIssue(rel, "name", "unknown key (the tenant's name is its file name)"))
            continue
        found[path.stem] = raw
    return found


def _read_toml(
    path: Path, env: Mapping[str, str], issues: list[ConfigIssue], *, missing: str, rel: str | None = None
) -> dict[str, Any]:
    """Every file read is required: ``missing`` is the reason reported when it does not exist."""
    rel = rel or path.name
    if not path.exists():
        issues.append(ConfigIssue(rel, None, missing))
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        issues.append(ConfigIssue(rel, None, f"cannot read ({exc}); make it a readable UTF-8 text file"))
        return {}
    except tomllib.TOMLDecodeError as exc:
        issues.append(ConfigIssue(rel, None, f"invalid TOML: {exc}"))
        return {}
    try:
        result: dict[str, Any] = interpolate(data, env)
    except InterpolationError as exc:
        issues.extend(ConfigIssue(rel, path, reason) for path, reason in exc.problems)
        return {}
    return result


def _with_strategy_options(
    raw: Mapping[str, Any], plugins: Plugins, file: str, prefix: str, issues: list[ConfigIssue]
) -> dict[str, Any]:
    """Move ``[compaction.<strategy>]`` tables into ``compaction.options``, validated by the
    strategy's own options model; check that the chosen strategy and summariser exist. A file
    without a ``[compaction]`` table gets the default strategy's default options too."""
    registry = plugins.strategies
    out = dict(raw)
    compaction = raw.get("compaction", {})
    if not isinstance(compaction, dict):
        return out
    where = f"{prefix}.compaction" if prefix else "compaction"
    table = dict(compaction)
    if "options" in table:
        issues.append(ConfigIssue(file, f"{where}.options", "unknown key"))
        table.pop("options")
    options: dict[str, StrategyOptions] = {}
    for name in registry:
        given = table.pop(name, None)
        if given is None and name != table.get("strategy", "none"):
            continue
        if given is not None and not isinstance(given, dict):
            issues.append(ConfigIssue(file, f"{where}.{name}", "must be a table"))
            continue
        valid = validate(registry[name].options_model, dict(given or {}), file, f"{where}.{name}", issues)
        if valid is not None:
            options[name] = valid
    for key, known in (("strategy", list(registry)), ("summarizer", plugins.summarizer_names)):
        chosen = table.get(key)
        if isinstance(chosen, str) and chosen not in known:
            issues.append(ConfigIssue(file, f"{where}.{key}", unknown_choice(key, chosen, known)))
            table.pop(key)
    table["options"] = options
    out["compaction"] = table
    return out


def _with_memory_defaults(raw: Mapping[str, Any], registry: StrategyRegistry) -> dict[str, Any]:
    """``[memory] enabled`` and ``layered``, where neither the tenant nor ``[defaults]`` sets them,
    as the tenant's strategy ships them (``StrategyTraits.memory_by_default``, ``layered_memory``);
    ``[compaction.tool_outputs] enabled`` likewise (off where ``compacts_only_to_fit``, or with
    ``[tools] enabled = false``)."""
    out = dict(raw)
    compaction, memory = raw.get("compaction", {}), raw.get("memory", {})
    strategy = compaction.get("strategy", "none") if isinstance(compaction, dict) else None
    if not isinstance(memory, dict) or not isinstance(strategy, str) or strategy not in registry:
        return out  # validation reports what is wrong
    traits = traits_of(registry[strategy])
    out["memory"] = {"enabled": traits.memory_by_default, "layered": traits.layered_memory, **memory}
    outputs, tools = compaction.get("tool_outputs", {}), raw.get("tools", {})
    if isinstance(outputs, dict) and isinstance(tools, dict):
        # rewritten unless the strategy promises the client's bytes, or nothing could retrieve them
        rewrite = not traits.compacts_only_to_fit and tools.get("enabled", True) is not False
        out["compaction"] = {**compaction, "tool_outputs": {"enabled": rewrite, **outputs}}
    return out


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _index_keys(tenants: Mapping[str, TenantConfig], issues: list[ConfigIssue]) -> dict[str, str]:
    index: dict[str, str] = {}
    for name, tenant in tenants.items():
        rel = f"tenants/{name}.toml"
        if tenant.api_keys and tenant.upstream.api_key is None:
            issues.append(
                ConfigIssue(
                    rel,
                    "upstream.api_key",
                    "required when api_keys is set: the client's Authorization header carries the "
                    "proxy key, so it cannot also carry the upstream key",
                )
            )
        for i, secret in enumerate(tenant.api_keys):
            value = secret.get_secret_value()
            if not value:
                issues.append(ConfigIssue(rel, f"api_keys[{i}]", "must not be empty"))
                continue
            fp = key_fingerprint(value)
            if fp in index and index[fp] != name:
                issues.append(ConfigIssue(rel, f"api_keys[{i}]", f"already used by tenant {index[fp]!r}"))
            index[fp] = name
    return index

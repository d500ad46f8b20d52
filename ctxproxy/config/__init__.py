"""Loading and validating ``proxy.toml`` and ``tenants/*.toml``."""

from ctxproxy.config.holder import ConfigHolder
from ctxproxy.config.issues import ConfigError, ConfigIssue
from ctxproxy.config.loader import Config, load_config
from ctxproxy.config.models import ProxySettings, TenantConfig

__all__ = [
    "Config",
    "ConfigError",
    "ConfigHolder",
    "ConfigIssue",
    "ProxySettings",
    "TenantConfig",
    "load_config",
]

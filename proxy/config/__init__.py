"""Loading and validating ``proxy.toml`` and ``tenants/*.toml``."""

from proxy.config.holder import ConfigHolder
from proxy.config.loader import Config, ConfigError, ConfigIssue, load_config
from proxy.config.models import ProxySettings, TenantConfig

__all__ = [
    "Config",
    "ConfigError",
    "ConfigHolder",
    "ConfigIssue",
    "ProxySettings",
    "TenantConfig",
    "load_config",
]

"""What the app says when it starts and stops: one ``tenant.ready`` line per tenant, and
``server.stopped``.

A tenant's line names its upstream by host (and port) only — never the key, and never the whole
``base_url``, which may carry credentials — its strategy and mode, whose key pays upstream
(``own_key``: the tenant's ``[upstream] api_key``; ``client_key``: the client's own, passed
through), and the effective window of each model pattern it configures (its own window, else
the built-in table's or the tenant's default, as a request for a model named like the pattern
would get).
"""

from __future__ import annotations

from typing import Any

import structlog
from yarl import URL

from ctxproxy.compaction.windows import context_window
from ctxproxy.config import Config, TenantConfig

log = structlog.get_logger("ctxproxy.server")


def tenant_summary(tenant: TenantConfig) -> dict[str, Any]:
    """The fields of a tenant's start-up line."""
    compaction = tenant.compaction
    return {
        "tenant": tenant.name,
        "upstream_host": URL(tenant.upstream.base_url).host_port_subcomponent,
        "strategy": compaction.strategy,
        "mode": compaction.mode,
        "summarizer": compaction.summarizer,
        "auth": "own_key" if tenant.upstream.api_key is not None else "client_key",
        "proxy_keys": len(tenant.api_keys),
        "windows": {pattern: context_window(pattern, tenant) for pattern in tenant.models},
        "default_window": tenant.default_context_window,
        "memory": tenant.memory.enabled,
        "tools": tenant.tools.enabled,
    }


def announce_tenants(config: Config) -> None:
    for name in sorted(config.tenants):
        log.info("tenant.ready", **tenant_summary(config.tenants[name]))


def announce_stopped(generation: int) -> None:
    log.info("server.stopped", config_generation=generation)

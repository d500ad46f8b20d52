"""Plugins load once, when the proxy starts: a reload (SIGHUP) keeps them, and a changed
``[plugins]`` table says it takes effect on restart, like ``[server]``."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import structlog

from ctxproxy.config import ConfigHolder
from tests.conftest import store_toml, write_config
from tests.plugins.sample import plugins_toml, tenant_toml


def test_a_reload_keeps_the_plugins_loaded_at_start(sample_plugin: ModuleType, tmp_path: Path) -> None:
    tenant = tenant_toml().replace("{upstream}", "http://upstream.test/v1")
    root = write_config(tmp_path, {"orchard": tenant}, store_toml(tmp_path / "data", plugins_toml("sample_every")))
    holder = ConfigHolder.load(root, {})
    plugins = holder.current.plugins

    (root / "proxy.toml").write_text(store_toml(tmp_path / "data", plugins_toml("sample_every", "sample_hooks")))
    with structlog.testing.capture_logs() as logs:
        assert holder.reload()

    assert holder.current.plugins is plugins
    assert not plugins.hooks.has("before_compact")
    (restart,) = [line for line in logs if line["event"] == "config.restart_required"]
    assert restart["sections"] == ["plugins"]

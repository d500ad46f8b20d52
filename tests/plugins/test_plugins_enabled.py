"""Which plugins load: ``[plugins] enabled`` (default: every one installed); one that fails to
load is skipped and said so, never a reason not to start.

Note 003's extensions are the operator's choice: an installed package is not necessarily one the
proxy should run. ``config check`` lists what would load and warns about what would not.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import structlog

from ctxproxy.cli import main
from ctxproxy.config import ConfigError
from ctxproxy.plugins import load_plugins
from tests.conftest import MakeProxy, Upstream, store_toml, write_config
from tests.plugins.sample import ask, conversation, plugins_toml, tenant_toml

SAMPLE = "ctxproxy-sample-plugin 0.1.0"


async def test_a_plugin_left_out_of_enabled_is_not_loaded(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """``sample_hooks`` is installed but not enabled: a tenant it would veto compacts, and it is
    told nothing."""
    proxy = await make_proxy({"veto": tenant_toml()}, plugins_toml("sample_every"))

    answer = await ask(proxy, upstream, "veto", conversation("Idared"))

    assert answer.headers["X-Ctx-Compacted"] == "1"
    assert sample_plugin.EVENTS == []


async def test_a_strategy_left_out_of_enabled_is_an_unknown_strategy(
    sample_plugin: ModuleType, make_proxy: MakeProxy
) -> None:
    with pytest.raises(ConfigError) as caught:
        await make_proxy({"orchard": tenant_toml()}, plugins_toml("sample_digest"))
    found = [(i.key, i.reason.split(" (")[0]) for i in caught.value.issues]
    assert ("compaction.strategy", "unknown strategy 'sample_every'") in found


async def test_a_plugin_that_fails_to_import_is_logged_and_skipped(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """All installed plugins load by default; ``sample_broken`` names a module that does not exist."""
    with structlog.testing.capture_logs() as logs:
        proxy = await make_proxy({"orchard": tenant_toml()}, "[plugins]\nhook_timeout = 0.1\n")
        answer = await ask(proxy, upstream, "orchard", conversation("Melrose"))

    assert answer.headers["X-Ctx-Compacted"] == "1"
    skipped = [(line["plugin"], line["error"]) for line in logs if line["event"] == "plugin.skipped"]
    assert skipped == [("sample_broken", "ModuleNotFoundError")]
    loaded = {line["plugin"] for line in logs if line["event"] == "plugin.loaded"}
    assert loaded == {
        "sample_every",
        "sample_crashing",
        "sample_digest",
        "sample_hooks",
        "sample_raising",
        "sample_sleeping",
        "sample_late",
        "sample_odd",
    }


def test_load_plugins_filters_by_name_and_reports_what_it_could_not_load(sample_plugin: ModuleType) -> None:
    plugins = load_plugins(["sample_digest", "sample_broken", "no_such_plugin"])

    assert [(p.group, p.name, p.source) for p in plugins.loaded] == [("ctxproxy.summarizers", "sample_digest", SAMPLE)]
    assert [(s.name, s.error) for s in plugins.skipped] == [("sample_broken", "ModuleNotFoundError")]
    assert plugins.unknown == ("no_such_plugin",)
    assert "sample_every" not in plugins.strategies
    assert plugins.summarizer_names == ["llm", "extractive", "sample_digest"]
    assert not plugins.hooks.has("before_compact")


def test_config_check_lists_the_loaded_plugins_and_warns_about_the_rest(
    sample_plugin: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugins = plugins_toml("sample_every", "sample_hooks", "sample_broken", "no_such_plugin")
    tenant = tenant_toml().replace("{upstream}", "http://upstream.test/v1")
    root = write_config(tmp_path / "config", {"orchard": tenant}, store_toml(tmp_path / "data", plugins))

    code = main(["config", "check", "--config", str(root)])

    out, err = capsys.readouterr()
    assert code == 0
    assert "plugins (2 loaded):\n" in out
    assert f"  ctxproxy.strategies: sample_every ({SAMPLE})\n" in out
    assert f"  ctxproxy.hooks: sample_hooks ({SAMPLE})\n" in out
    assert (
        "warning: proxy.toml: plugins: plugin 'sample_broken' (ctxproxy.hooks) did not load and is skipped: "
        "ModuleNotFoundError\n"
    ) in err
    assert "warning: proxy.toml: plugins.enabled: no installed plugin is named 'no_such_plugin'\n" in err


def test_config_check_without_plugins_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_config(tmp_path / "config", {"default": ""}, store_toml(tmp_path / "data"))

    assert main(["config", "check", "--config", str(root)]) == 0

    assert "plugins: none loaded\n" in capsys.readouterr().out

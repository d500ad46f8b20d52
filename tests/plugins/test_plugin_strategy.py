"""A plugin's strategy, named by a tenant's ``[compaction] strategy``, compacts its conversations.

Note 003: "Extension 钩子 … 这让 extension 可以实现比默认更智能的压缩策略" — extensions let a
plugin bring a smarter compaction strategy than the default. The sample plugin's ``sample_every``
summarises all but the newest ``keep`` messages once ``every`` have gathered, into blocks of its
own kind rendered under ``## Sample summary``.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from ctxproxy.config import ConfigError, load_config
from tests.conftest import MakeProxy, Upstream, write_config
from tests.plugins.sample import SYSTEM, ask, conversation, plugins_toml, tenant_toml


async def test_a_tenant_running_the_plugin_strategy_compacts_with_it(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """The strategy's plan is executed by the engine like a built-in's: the summarised range is
    replaced by a summary message of the plugin's block kind, the newest ``keep`` stay raw."""
    proxy = await make_proxy({"orchard": tenant_toml()}, plugins_toml("sample_every"))
    messages = conversation("Gala")

    answer = await ask(proxy, upstream, "orchard", messages)

    assert answer.headers["X-Ctx-Strategy"] == "sample_every"
    assert answer.headers["X-Ctx-Compacted"] == "1"
    assert answer.headers["X-Ctx-Summarized"] == "10"
    system, summary, *kept = answer.forwarded
    assert system == SYSTEM
    assert summary["role"] == "assistant" and summary["name"] == "sample_summary"
    assert summary["content"].startswith("## Sample summary\n\n")
    assert "Gala" in summary["content"]
    assert kept == messages[10:]


async def test_the_plugin_strategy_reads_its_own_options_table(
    sample_plugin: ModuleType, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """``[compaction.sample_every]`` is validated by the plugin's options model and used: with
    ``every = 20`` the same conversation is not compacted."""
    proxy = await make_proxy({"patient": tenant_toml(options="every = 20")}, plugins_toml("sample_every"))

    answer = await ask(proxy, upstream, "patient", conversation("Fuji"))

    assert "X-Ctx-Compacted" not in answer.headers
    assert answer.forwarded == conversation("Fuji")


def test_an_unknown_key_in_the_plugin_options_table_is_a_config_error(
    sample_plugin: ModuleType, tmp_path: Path
) -> None:
    root = write_config(tmp_path, {"orchard": tenant_toml(options="evry = 3").replace("{upstream}", "http://x.test")})
    with pytest.raises(ConfigError) as caught:
        load_config(root, {})
    (issue,) = caught.value.issues
    assert (issue.file, issue.key) == ("tenants/orchard.toml", "compaction.sample_every.evry")
    assert "did you mean `every`" in issue.reason


def test_without_the_plugin_installed_its_strategy_is_unknown(tmp_path: Path) -> None:
    root = write_config(tmp_path, {"orchard": tenant_toml().replace("{upstream}", "http://x.test")})
    with pytest.raises(ConfigError) as caught:
        load_config(root, {})
    found = [(i.key, i.reason.split(" (")[0]) for i in caught.value.issues]
    assert ("compaction.strategy", "unknown strategy 'sample_every'") in found

"""``[compaction.tool_outputs]``: on by default for every strategy but ``none`` (the loader fills
it in from the strategy's traits), its keys checked, and ``config check``'s warning when it could
do nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxproxy.config import ConfigError, load_config
from ctxproxy.config.models import DEFAULT_KEEP_TURNS
from tests.config.dirs import config_dir


def tenant(root: Path, text: str) -> tuple[object, list[tuple[str, str | None, str]]]:
    config_dir(root, {"tenants/acme.toml": text})
    config = load_config(root, {})
    return config.tenants["acme"].compaction.tool_outputs, [(w.file, w.key, w.reason) for w in config.warnings]


@pytest.mark.parametrize(("strategy", "enabled"), [("none", False), ("cut_point", True), ("paged", True)])
def test_on_for_every_strategy_but_none(tmp_path: Path, strategy: str, enabled: bool) -> None:
    outputs, _ = tenant(tmp_path, f"[compaction]\nstrategy = '{strategy}'\n")
    assert outputs.enabled is enabled and outputs.keep_turns == DEFAULT_KEEP_TURNS  # type: ignore[attr-defined]


def test_set_keys_are_kept(tmp_path: Path) -> None:
    text = "[compaction]\nstrategy = 'none'\n[compaction.tool_outputs]\nenabled = true\nmin_tokens = 300\nkeep_tools = ['read']\n"
    outputs, warnings = tenant(tmp_path, text)
    assert (outputs.enabled, outputs.min_tokens, outputs.keep_tools) == (True, 300, ["read"])  # type: ignore[attr-defined]
    assert warnings == []


def test_an_unknown_key_is_an_error_naming_it(tmp_path: Path) -> None:
    config_dir(tmp_path, {"tenants/acme.toml": "[compaction.tool_outputs]\nkeep_turn = 3\n"})
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path, {})
    assert "compaction.tool_outputs.keep_turn" in str(raised.value)


def test_without_proxy_tools_it_is_off_and_check_warns_when_set(tmp_path: Path) -> None:
    text = "[compaction]\nstrategy = 'cut_point'\n[tools]\nenabled = false\n"
    outputs, warnings = tenant(tmp_path, text)
    assert outputs.enabled is False and warnings == []  # type: ignore[attr-defined]
    _, warnings = tenant(tmp_path, text + "[compaction.tool_outputs]\nenabled = true\n")
    [(file, key, reason)] = warnings
    assert (file, key) == ("tenants/acme.toml", "compaction.tool_outputs.enabled")
    assert reason.startswith("does nothing while [tools] enabled = false")

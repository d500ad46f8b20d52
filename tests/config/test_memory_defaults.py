"""``[memory] enabled`` and ``layered`` default to what the tenant's strategy ships (its traits):
memory on for ``rolling_summary``, ``rounds``, ``cut_point`` and ``paged`` — note 001's
``enable_memory_injection`` "默认 True" and its ``search_memory`` "默认注册" — and off for ``none``
and ``sliding_window``; layered (note 002) for ``rounds`` alone. Either file may still say otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxproxy.config import load_config
from ctxproxy.strategies.registry import builtin_registry
from ctxproxy.strategies.traits import traits_of
from tests.config.dirs import config_dir, issues_of

EXPECTED = {
    "none": (False, False),
    "sliding_window": (False, False),
    "rolling_summary": (True, False),
    "rounds": (True, True),
    "cut_point": (True, False),
    "paged": (True, False),
}


def memory_of(root: Path, tenant: str, proxy: str = "") -> tuple[bool, bool]:
    loaded = load_config(config_dir(root, {"proxy.toml": proxy, "tenants/acme.toml": tenant}), {})
    memory = loaded.tenants["acme"].memory
    return memory.enabled, memory.layered


@pytest.mark.parametrize("strategy", sorted(EXPECTED))
def test_the_strategy_decides_when_the_tenant_does_not(tmp_path: Path, strategy: str) -> None:
    assert memory_of(tmp_path, f'[compaction]\nstrategy = "{strategy}"\n') == EXPECTED[strategy]
    traits = traits_of(builtin_registry()[strategy])  # a trait of the strategy, not a list of names
    assert (traits.memory_by_default, traits.layered_memory) == EXPECTED[strategy]


def test_without_a_compaction_table_the_default_strategy_decides(tmp_path: Path) -> None:
    assert memory_of(tmp_path, "") == EXPECTED["none"]


@pytest.mark.parametrize("strategy", ["rounds", "paged"])
def test_a_tenant_turns_memory_off(tmp_path: Path, strategy: str) -> None:
    tenant = f'[compaction]\nstrategy = "{strategy}"\n[memory]\nenabled = false\n'
    assert memory_of(tmp_path, tenant)[0] is False


def test_a_tenant_turns_layered_off_or_on(tmp_path: Path) -> None:
    assert memory_of(tmp_path, '[compaction]\nstrategy = "rounds"\n[memory]\nlayered = false\n') == (True, False)
    (tmp_path / "other").mkdir()
    tenant = '[compaction]\nstrategy = "cut_point"\n[memory]\nlayered = true\n'
    assert memory_of(tmp_path / "other", tenant) == (True, True)


def test_proxy_defaults_win_over_the_strategy_and_the_tenant_over_them(tmp_path: Path) -> None:
    defaults = "[defaults.memory]\nenabled = false\n"
    assert memory_of(tmp_path, '[compaction]\nstrategy = "rounds"\n', defaults) == (False, True)
    (tmp_path / "other").mkdir()
    tenant = '[compaction]\nstrategy = "none"\n[memory]\nenabled = true\n'
    assert memory_of(tmp_path / "other", tenant, defaults) == (True, False)


def test_a_memory_value_that_is_not_a_table_is_still_reported(tmp_path: Path) -> None:
    root = config_dir(tmp_path, {"tenants/acme.toml": 'memory = 3\n[compaction]\nstrategy = "rounds"\n'})
    assert [issue.key for issue in issues_of(root)] == ["memory"]

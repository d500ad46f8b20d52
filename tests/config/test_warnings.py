"""Warnings: a directory that loads but holds something without effect. A strategy table for a
strategy that does not run, a file in ``tenants/`` that is not read. Nothing is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxproxy.config import ConfigError, load_config
from tests.config.dirs import config_dir


def write(root: Path, proxy_toml: str = "", tenants: dict[str, str] | None = None) -> Path:
    files = {f"tenants/{name}": text for name, text in (tenants or {}).items()}
    return config_dir(root, {"proxy.toml": proxy_toml, **files})


def warned(root: Path) -> list[tuple[str, str | None, str]]:
    return [(w.file, w.key, w.reason) for w in load_config(root, {}).warnings]


def test_a_clean_directory_has_no_warnings(tmp_path: Path) -> None:
    root = write(
        tmp_path, tenants={"acme.toml": "[compaction]\nstrategy = 'rounds'\n[compaction.rounds]\ncatch_up = true\n"}
    )
    assert warned(root) == []


def test_a_strategy_table_the_tenant_does_not_use(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        tenants={
            "acme.toml": "[compaction]\nstrategy = 'rounds'\n[compaction.paged]\nactive_pages = 3\n[compaction.rounds]\n",
            "beta.toml": "[compaction.cut_point]\nreserve_tokens = 10\n",  # strategy: the default, none
        },
    )
    assert warned(root) == [
        ("tenants/acme.toml", "compaction.paged", "not used: this tenant's strategy is 'rounds', not 'paged'"),
        ("tenants/beta.toml", "compaction.cut_point", "not used: this tenant's strategy is 'none', not 'cut_point'"),
    ]


def test_a_defaults_strategy_table_warns_only_when_no_tenant_uses_it(tmp_path: Path) -> None:
    proxy_toml = (
        "[defaults.compaction.cut_point]\nreserve_tokens = 100\n[defaults.compaction.paged]\nactive_pages = 2\n"
    )
    root = write(
        tmp_path,
        proxy_toml,
        {"acme.toml": "[compaction]\nstrategy = 'cut_point'\n", "beta.toml": "[compaction]\nstrategy = 'rounds'\n"},
    )
    config = load_config(root, {})
    # [defaults] strategy tables are tenant-shaped: merged into the tenant that runs the strategy.
    assert config.tenants["acme"].compaction.options["cut_point"].reserve_tokens == 100
    assert [(w.file, w.key, w.reason) for w in config.warnings] == [
        ("proxy.toml", "defaults.compaction.paged", "not used: no tenant's strategy is 'paged'"),
    ]


def test_a_defaults_strategy_table_is_validated_by_its_strategy(tmp_path: Path) -> None:
    root = write(tmp_path, "[defaults.compaction.cut_point]\nreserve_tokens = -1\nkeep_recent = 5\n")
    with pytest.raises(ConfigError) as info:
        load_config(root, {})
    assert {(i.file, i.key) for i in info.value.issues} == {
        ("proxy.toml", "defaults.compaction.cut_point.reserve_tokens"),
        ("proxy.toml", "defaults.compaction.cut_point.keep_recent"),
    }


def test_files_in_tenants_that_are_not_toml(tmp_path: Path) -> None:
    root = write(
        tmp_path, tenants={"acme.toml": "", "beta.tml": "", "acme.toml.bak": "", "NOTES.md": "", "Big.TOML": ""}
    )
    (root / "tenants" / "archive").mkdir()
    (root / "tenants" / ".acme.toml.swp").write_text("")  # an editor's: hidden files are left alone
    (root / "tenants" / ".gitkeep").write_text("")
    reasons = {file: reason for file, _, reason in warned(root)}
    assert sorted(reasons) == [
        "tenants/Big.TOML",
        "tenants/NOTES.md",
        "tenants/acme.toml.bak",
        "tenants/archive",
        "tenants/beta.tml",
    ]
    assert set(reasons.values()) == {"not read: only tenants/*.toml files are tenants"}


def test_warnings_travel_with_errors(tmp_path: Path) -> None:
    root = write(tmp_path, "[server]\nport = 0\n", {"acme.toml": "", "beta.tml": ""})
    with pytest.raises(ConfigError) as info:
        load_config(root, {})
    assert [i.key for i in info.value.issues] == ["server.port"]
    assert [w.file for w in info.value.warnings] == ["tenants/beta.tml"]

"""An unknown key or strategy names the nearest valid one ("did you mean `strategy`?")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.config.dirs import config_dir, issues_of

TENANT = "tenants/acme.toml"


@pytest.mark.parametrize(
    ("file", "text", "key", "hint"),
    [
        ("proxy.toml", "[server]\nprot = 8080\n", "server.prot", "port"),
        ("proxy.toml", "[stor]\npath = 'x'\n", "stor", "store"),
        ("proxy.toml", "[defaults.upstream]\nbase_ulr = 'http://x/v1'\n", "defaults.upstream.base_ulr", "base_url"),
        (TENANT, "[compaction]\nstratgy = 'rounds'\n", "compaction.stratgy", "strategy"),
        (TENANT, "[upstream]\napikey = 'sk'\n", "upstream.apikey", "api_key"),
        (TENANT, "[compaction.cut_pont]\nreserve_tokens = 1\n", "compaction.cut_pont", "cut_point"),
        (
            TENANT,
            "[compaction]\nstrategy = 'cut_point'\n[compaction.cut_point]\nkeep_recent_token = 5\n",
            "compaction.cut_point.keep_recent_token",
            "keep_recent_tokens",
        ),
        (TENANT, '[models."ft-*"]\ncontext_windw = 4096\n', "models.ft-*.context_windw", "context_window"),
        (TENANT, "default_context_windows = 4096\n", "default_context_windows", "default_context_window"),
    ],
)
def test_a_misspelt_key_names_the_nearest_valid_one(tmp_path: Path, file: str, text: str, key: str, hint: str) -> None:
    issues = issues_of(config_dir(tmp_path, {file: text}))
    [issue] = [i for i in issues if i.key == key]  # (a required key may be missing as well)
    assert issue.file == file
    assert issue.reason == f"unknown key; did you mean `{hint}`?"


def test_a_key_written_outside_its_table_names_the_table(tmp_path: Path) -> None:
    [issue] = issues_of(config_dir(tmp_path, {TENANT: "strategy = 'rounds'\n"}))
    assert (issue.file, issue.key) == ("tenants/acme.toml", "strategy")
    assert issue.reason == "unknown key; did you mean `compaction.strategy` (in the [compaction] table)?"


def test_a_key_like_nothing_gets_no_guess(tmp_path: Path) -> None:
    [issue] = issues_of(config_dir(tmp_path, {TENANT: "colour = 'blue'\n"}))
    assert issue.reason == "unknown key"


def test_a_misspelt_strategy_names_the_nearest_one_and_lists_them_all(tmp_path: Path) -> None:
    [issue] = issues_of(config_dir(tmp_path, {TENANT: "[compaction]\nstrategy = 'rolling-summary'\n"}))
    assert issue.key == "compaction.strategy"
    assert issue.reason.startswith("unknown strategy 'rolling-summary' (available: cut_point, none, paged, ")
    assert issue.reason.endswith("; did you mean `rolling_summary`?")


@pytest.mark.parametrize(
    ("file", "text", "key", "reason"),
    [
        (
            TENANT,
            "[upstream]\napi_keys = ['pk-1']\n",
            "upstream.api_keys",
            "unknown key; `api_keys` belongs at the top of the file, before any [table], not in [upstream]",
        ),
        (
            "proxy.toml",
            "[defaults.upstream]\napi_keys = ['pk-1']\n",
            "defaults.upstream.api_keys",
            "unknown key; `api_keys` belongs in the [defaults] table, not in [defaults.upstream]",
        ),
    ],
)
def test_a_key_written_inside_the_wrong_table_names_where_it_belongs(
    tmp_path: Path, file: str, text: str, key: str, reason: str
) -> None:
    """Not the nearest spelling (``api_keys`` in [upstream] is not a misspelt ``api_key``)."""
    issues = issues_of(config_dir(tmp_path, {file: text}))
    [issue] = [i for i in issues if i.key == key]
    assert issue.reason == reason

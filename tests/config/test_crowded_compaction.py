"""A warning when a tenant's compaction numbers leave so little room between a compaction and
the next trigger that it would compact on (nearly) every turn, at the window of a model it
configures or its default window, saying what to change (``config.lint.crowded_compaction``).
The defaults never warn with ``optimise = "cost"``: they scale with the window."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxproxy.config import load_config
from tests.config.dirs import config_dir

MODELS = '[models."small*"]\ncontext_window = 4096\n[models."mid*"]\ncontext_window = 8192\n'


def warnings(root: Path, tenant: str) -> list[tuple[str, str | None, str]]:
    config_dir(root, {"tenants/acme.toml": tenant})
    return [(w.file, w.key, w.reason) for w in load_config(root, {}).warnings]


def test_the_issues_numbers_at_a_4k_window_warn_and_say_what_to_change(tmp_path: Path) -> None:
    """keep_recent_tokens 1000 and reserve_tokens 512 at a 4,096 window, with a 1,200-token
    summary: a request with a 512-token answer (an eighth of the window) and 800 tokens of memories
    has a budget of 2,784; it compacts above 2,272 and keeps 2,200 — every turn."""
    tenant = (
        "default_context_window = 4096\n[compaction]\nstrategy = 'cut_point'\nsummary_max_tokens = 1200\n"
        "[compaction.cut_point]\nkeep_recent_tokens = 1000\nreserve_tokens = 512\n"
    )
    [(file, key, reason)] = warnings(tmp_path, tenant)
    assert (file, key) == ("tenants/acme.toml", "compaction.cut_point")
    assert reason.startswith("too little room between compactions, at a 4096-token window (a prompt budget of 2784)")
    assert "compacts above 2272 prompt tokens and keeps at least 1000 tokens plus a summary of up to 1200" in reason
    assert "lower keep_recent_tokens to at most 654" in reason
    assert "leave reserve_tokens and keep_recent_tokens unset (they scale with the window: 417 and 696 here)" in reason


def test_the_notes_cut_point_numbers_warn_at_each_small_window_the_tenant_configures(tmp_path: Path) -> None:
    tenant = (
        f"{MODELS}[compaction]\nstrategy = 'cut_point'\n"
        "[compaction.cut_point]\nkeep_recent_tokens = 20000\nreserve_tokens = 16384\n"
    )
    found = warnings(tmp_path, tenant)
    assert [reason.split(" (a prompt budget")[0] for _, _, reason in found] == [
        "too little room between compactions, at a 4096-token window",
        "too little room between compactions, at a 8192-token window",
    ]  # and not at the default window, 128000
    assert all("always (reserve_tokens 16384 ≥ the budget)" in reason for _, _, reason in found)


@pytest.mark.parametrize("strategy", ["none", "sliding_window", "rolling_summary", "rounds", "cut_point", "paged"])
def test_the_defaults_never_warn(tmp_path: Path, strategy: str) -> None:
    windows = '[models."tiny*"]\ncontext_window = 2048\n[models."huge*"]\ncontext_window = 1000000\n'
    assert warnings(tmp_path, f"{MODELS}{windows}[compaction]\nstrategy = '{strategy}'\n") == []


def test_tokens_mode_rolling_summary_at_a_4k_window_warns_and_points_at_cost(tmp_path: Path) -> None:
    """The note's headroom rule, capped at what a compaction to its 0.6 target frees, fires right
    at the target in a 4k window: with "tokens" it compacts on every turn."""
    tenant = "default_context_window = 4096\n[compaction]\nstrategy = 'rolling_summary'\noptimise = 'tokens'\n"
    [(_, key, reason)] = warnings(tmp_path, tenant)
    assert key == "compaction.rolling_summary"
    assert "compacts at 1670 prompt tokens and aims at 1670" in reason
    assert reason.endswith(
        'lower target_ratio or headroom_min_tokens, or raise threshold, or set [compaction] optimise = "cost"'
    )


@pytest.mark.parametrize(
    ("strategy", "table", "says"),
    [
        ("rounds", "cached_context_turns = 1", "it compresses a round on every turn: raise cached_context_turns"),
        ("paged", "archive_batch = 1", "it archives a page on every turn: raise archive_batch"),
        ("sliding_window", "compression_cooldown_sec = 0", "with no cooldown it consolidates on every turn"),
        (
            "sliding_window",
            "compression_window_size = 2",
            "it consolidates on every turn: raise compression_window_size",
        ),
    ],
)
def test_batches_of_one_turn_warn_once(tmp_path: Path, strategy: str, table: str, says: str) -> None:
    tenant = f"{MODELS}[compaction]\nstrategy = '{strategy}'\n[compaction.{strategy}]\n{table}\n"
    [(_, key, reason)] = warnings(tmp_path, tenant)  # once, not once per window
    assert key == f"compaction.{strategy}" and says in reason

"""The config keys of metrics: ``[server] metrics`` / ``metrics_auth`` and ``[models."<glob>"]
input_price_per_mtok``, ``cached_input_price_per_mtok`` and ``cache_discount``, accepted by ``load_config`` and ``ctxproxy config check``, refused (file
and key named) when they have the wrong type or make no sense."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ctxproxy.compaction.windows import configured, context_window, window_source
from ctxproxy.config import load_config
from tests.config.test_loader import find, issues_of, write

REPO = Path(__file__).resolve().parents[2]
TENANT = """
[upstream]
base_url = "http://127.0.0.1:1/v1"
[models."gpt-4o*"]
context_window = 64000
[models."gpt-*"]
input_price_per_mtok = 2
[models."claude*"]
input_price_per_mtok = 3.75
cached_input_price_per_mtok = 0.3
cache_discount = 0.08
context_window = 100000
"""
SERVER = '[server]\nmetrics = false\nmetrics_auth = true\n[admin]\napi_key = "adm"\n'


def test_the_keys_are_read(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, SERVER, {"default.toml": TENANT}), {})
    assert config.settings.server.metrics is False and config.settings.server.metrics_auth is True
    tenant = config.tenants["default"]
    # Each value from the first pattern that sets it: a price-only pattern leaves windows alone.
    assert configured("gpt-4o-mini", tenant, lambda m: m.input_price_per_mtok) == (2.0, "gpt-*")
    assert context_window("gpt-4o-mini", tenant) == 64000
    assert window_source("gpt-4o-mini", tenant) == (64000, '[models."gpt-4o*"]')
    assert context_window("gpt-5", tenant) == 400_000  # the built-in table's, not the price pattern's
    assert configured("claude-3", tenant, lambda m: m.input_price_per_mtok) == (3.75, "claude*")
    assert configured("claude-3", tenant, lambda m: m.cached_input_price_per_mtok) == (0.3, "claude*")
    assert configured("claude-3", tenant, lambda m: m.cache_discount) == (0.08, "claude*")
    assert context_window("claude-3", tenant) == 100000
    assert configured("mistral", tenant, lambda m: m.input_price_per_mtok) is None
    assert load_config(write(tmp_path / "defaults", "", {"default.toml": TENANT}), {}).settings.server.metrics is True


def test_wrong_types_and_empty_patterns_are_refused(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        '[server]\nmetrics = "yes"\nmetrics_auth = 1\n',
        {
            "default.toml": '[models."gpt*"]\ninput_price_per_mtok = "2.5"\n[models."x*"]\n[models."y*"]\n'
            'input_price_per_mtok = -1\n[models."z*"]\ncache_discount = 1.5\ncached_input_price_per_mtok = -0.1\n',
        },
    )
    issues = issues_of(root)
    assert "valid boolean" in find(issues, "proxy.toml", "server.metrics").reason
    assert "valid boolean" in find(issues, "proxy.toml", "server.metrics_auth").reason
    assert "valid number" in find(issues, "tenants/default.toml", "models.gpt*.input_price_per_mtok").reason
    assert "greater than or equal to 0" in find(issues, "tenants/default.toml", "models.y*.input_price_per_mtok").reason
    assert "less than or equal to 1" in find(issues, "tenants/default.toml", "models.z*.cache_discount").reason
    assert (
        "greater than or equal to 0"
        in find(issues, "tenants/default.toml", "models.z*.cached_input_price_per_mtok").reason
    )
    assert (
        "set at least one of context_window, input_price_per_mtok"
        in find(issues, "tenants/default.toml", "models.x*").reason
    )


def test_metrics_auth_needs_an_admin_key(tmp_path: Path) -> None:
    issues = issues_of(write(tmp_path, "[server]\nmetrics_auth = true\n", {"default.toml": ""}))
    assert "[admin] api_key" in find(issues, "proxy.toml", "server.metrics_auth").reason
    # Metrics off: nothing to guard, nothing to complain about.
    load_config(write(tmp_path / "off", "[server]\nmetrics = false\nmetrics_auth = true\n", {"default.toml": ""}), {})


def test_config_check_accepts_and_refuses_them(tmp_path: Path) -> None:
    good = write(tmp_path / "good", SERVER, {"default.toml": TENANT})
    bad = write(
        tmp_path / "bad", '[server]\nmetrics = "no"\n', {"default.toml": '[models."m"]\ninput_price_per_mtok = "1"\n'}
    )

    def check(root: Path) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "ctxproxy", "config", "check", "--config", str(root)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=REPO, check=False)

    ok = check(good)
    assert ok.returncode == 0, ok.stderr
    # The windows it lists are the patterns that set one; a price-only pattern is not a window.
    assert '[models."gpt-4o*"] 64000; [models."claude*"] 100000;' in ok.stdout and "None" not in ok.stdout
    refused = check(bad)
    assert refused.returncode == 1
    assert "proxy.toml: server.metrics: Input should be a valid boolean" in refused.stderr
    assert "tenants/default.toml: models.m.input_price_per_mtok: Input should be a valid number" in refused.stderr

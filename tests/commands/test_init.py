"""``ctxproxy init [DIR]`` and ``ctxproxy --version``, run as a user runs them: a subprocess in an
empty directory, outside the repository."""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

from ctxproxy.commands.init import STARTER_FILES, STARTER_UPSTREAMS, starter_text
from ctxproxy.config import load_config
from ctxproxy.strategies.registry import builtin_registry

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-init-test-9f3c1d"


def ctxproxy(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXPROXY_"))}
    return subprocess.run(
        [sys.executable, "-m", "ctxproxy", *args],
        capture_output=True, text=True, timeout=30, cwd=cwd, env={**clean, **(env or {})}, check=False,
    )  # fmt: skip


def written(root: Path) -> dict[str, str]:
    return {rel: (root / rel).read_text(encoding="utf-8") for rel in STARTER_FILES}


def test_init_writes_the_starter_config_that_config_check_accepts(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    result = ctxproxy(tmp_path, "init", env=env)
    assert result.returncode == 0, result.stderr
    assert written(tmp_path / "config") == {rel: starter_text(rel) for rel in STARTER_FILES}
    assert sorted(p.name for p in (tmp_path / "config").rglob("*") if p.is_file()) == ["default.toml", "proxy.toml"]
    assert "wrote config/proxy.toml" in result.stdout and "wrote config/tenants/default.toml" in result.stdout
    assert "$OPENAI_API_KEY (set here)" in result.stdout
    assert "next: ctxproxy config check && ctxproxy serve" in result.stdout
    # The key is a ${OPENAI_API_KEY} reference, never its value, in the files and in what was printed.
    assert SECRET not in result.stdout + result.stderr + "".join(written(tmp_path / "config").values())
    assert "${OPENAI_API_KEY" in written(tmp_path / "config")["tenants/default.toml"]

    check = ctxproxy(tmp_path, "config", "check", env=env)
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith("config: OK (1 tenant(s): default)")
    assert check.stderr == ""  # not even a warning


def test_the_starter_config_follows_the_environment(tmp_path: Path) -> None:
    assert ctxproxy(tmp_path, "init").returncode == 0
    with_env = load_config(
        tmp_path / "config", {"OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": "http://gw.local:4000/v1"}
    )
    tenant = with_env.tenants["default"]
    assert tenant.upstream.base_url == "http://gw.local:4000/v1"
    assert tenant.upstream.api_key is not None and tenant.upstream.api_key.get_secret_value() == SECRET
    without = load_config(tmp_path / "config", {}).tenants["default"]
    assert without.upstream.base_url == "https://api.openai.com/v1"
    assert without.upstream.api_key is None  # each client's own key passes through
    assert load_config(tmp_path / "config", {}).settings.store.path == "data"
    assert load_config(tmp_path / "config", {"CTXPROXY_DATA": "/srv/ctx"}).settings.store.path == "/srv/ctx"


def test_init_without_a_key_says_the_clients_key_passes_through(tmp_path: Path) -> None:
    result = ctxproxy(tmp_path, "init")
    assert result.returncode == 0
    assert "OPENAI_API_KEY is not set" in result.stdout and "passed through" in result.stdout
    assert "OPENAI_BASE_URL is not set" in result.stdout


def test_init_never_overwrites_without_force(tmp_path: Path) -> None:
    assert ctxproxy(tmp_path, "init").returncode == 0
    mine = tmp_path / "config" / "tenants" / "default.toml"
    mine.write_text("# my own tenant\n")
    (tmp_path / "config" / "tenants" / "acme.toml").write_text("# another tenant\n")

    again = ctxproxy(tmp_path, "init")
    assert again.returncode == 1
    assert "config/proxy.toml, config/tenants/default.toml already exist(s)" in again.stderr
    assert "--force" in again.stderr and "Traceback" not in again.stderr
    assert again.stdout == ""
    assert mine.read_text() == "# my own tenant\n"

    forced = ctxproxy(tmp_path, "init", "--force")
    assert forced.returncode == 0, forced.stderr
    assert mine.read_text() == starter_text("tenants/default.toml")
    assert (tmp_path / "config" / "tenants" / "acme.toml").read_text() == "# another tenant\n"  # not a starter file


def test_init_refuses_when_only_one_starter_file_exists(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "proxy.toml").write_text("[server]\nport = 9\n")
    result = ctxproxy(tmp_path, "init")
    assert result.returncode == 1
    assert not (tmp_path / "config" / "tenants").exists()  # nothing written at all


def test_init_into_another_directory_says_how_to_use_it(tmp_path: Path) -> None:
    result = ctxproxy(tmp_path, "init", "my proxy")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "my proxy" / "tenants" / "default.toml").is_file()
    assert "next: ctxproxy config check --config 'my proxy' && ctxproxy serve --config 'my proxy'" in result.stdout


def test_init_where_nothing_can_be_written(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = ctxproxy(tmp_path, "init", "a-file/config")
    assert result.returncode == 1
    assert result.stderr.startswith("ctxproxy init: cannot write ")
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


def test_version_is_the_installed_packages(tmp_path: Path) -> None:
    result = ctxproxy(tmp_path, "--version")
    assert result.returncode == 0
    assert result.stdout == f"ctxproxy {version('ctxproxy')}\n"


@pytest.mark.parametrize("upstream", list(STARTER_UPSTREAMS))
def test_the_starter_tenant_names_every_strategy(upstream: str) -> None:
    comment = starter_text("tenants/default.toml", upstream)
    assert all(name in comment for name in builtin_registry())


def test_init_for_anthropic_writes_a_tenant_on_anthropics_api_that_config_check_accepts(tmp_path: Path) -> None:
    env = {"ANTHROPIC_API_KEY": SECRET}
    result = ctxproxy(tmp_path, "init", "--upstream", "anthropic", env=env)
    assert result.returncode == 0, result.stderr
    assert written(tmp_path / "config") == {rel: starter_text(rel, "anthropic") for rel in STARTER_FILES}
    assert "upstream: Anthropic's API (ANTHROPIC_UPSTREAM_URL is not set" in result.stdout
    assert "upstream key: $ANTHROPIC_API_KEY (set here)" in result.stdout
    assert SECRET not in result.stdout + "".join(written(tmp_path / "config").values())
    check = ctxproxy(tmp_path, "config", "check", env=env)
    assert check.returncode == 0, check.stderr
    assert check.stderr == ""
    tenant = load_config(tmp_path / "config", env).tenants["default"]
    assert tenant.upstream.base_url == "https://api.anthropic.com/v1"
    assert tenant.upstream.api_key is not None and tenant.upstream.api_key.get_secret_value() == SECRET
    gateway = load_config(tmp_path / "config", {"ANTHROPIC_UPSTREAM_URL": "http://gw.local/v1"}).tenants["default"]
    assert gateway.upstream.base_url == "http://gw.local/v1" and gateway.upstream.api_key is None


def test_init_for_gemini_writes_a_tenant_on_geminis_api_that_config_check_accepts(tmp_path: Path) -> None:
    env = {"GEMINI_API_KEY": SECRET}
    result = ctxproxy(tmp_path, "init", "--upstream", "gemini", env=env)
    assert result.returncode == 0, result.stderr
    assert written(tmp_path / "config") == {rel: starter_text(rel, "gemini") for rel in STARTER_FILES}
    assert "upstream: Google's Gemini API (GEMINI_UPSTREAM_URL is not set" in result.stdout
    assert "upstream key: $GEMINI_API_KEY (set here)" in result.stdout
    assert SECRET not in result.stdout + "".join(written(tmp_path / "config").values())
    check = ctxproxy(tmp_path, "config", "check", env=env)
    assert check.returncode == 0 and check.stderr == "", check.stderr
    tenant = load_config(tmp_path / "config", env).tenants["default"]
    assert tenant.upstream.base_url == "https://generativelanguage.googleapis.com/v1beta"
    assert tenant.upstream.api_key is not None and tenant.upstream.api_key.get_secret_value() == SECRET


def test_init_refuses_an_unknown_upstream_and_names_the_known_ones(tmp_path: Path) -> None:
    result = ctxproxy(tmp_path, "init", "--upstream", "mistral")
    assert result.returncode == 2
    assert "invalid choice: 'mistral'" in result.stderr and "openai" in result.stderr and "anthropic" in result.stderr
    assert not (tmp_path / "config").exists()


def test_the_starter_files_are_package_data() -> None:
    """A wheel holds what ``[tool.setuptools.package-data]`` names: every starter file must match."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["ctxproxy.config"]
    starter = REPO / "ctxproxy" / "config" / "starter"
    shipped = sorted(str(p.relative_to(starter.parent)) for p in starter.rglob("*") if p.is_file())
    sources = {source for upstream in STARTER_UPSTREAMS.values() for source in upstream.shipped.values()}
    assert shipped == sorted(f"starter/{source}" for source in sources)
    for rel in shipped:
        assert any(fnmatch.fnmatch(rel, pattern) and rel.count("/") == pattern.count("/") for pattern in patterns), rel

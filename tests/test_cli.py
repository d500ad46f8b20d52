"""The ``ctxproxy`` command line (DESIGN.md §6), run as a real subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONSOLE_SCRIPT = shutil.which("ctxproxy", path=os.path.dirname(sys.executable))

ENTRY_POINTS = [pytest.param([sys.executable, "-m", "ctxproxy"], id="python-m-proxy")]
if CONSOLE_SCRIPT:
    ENTRY_POINTS.append(pytest.param([CONSOLE_SCRIPT], id="console-script"))


def run(
    command: list[str], *args: str, env: dict[str, str] | None = None, timeout: float = 20
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXAMPLE_", "CTXPROXY_"))}
    full_env.update(env or {})
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, env=full_env, check=False
    )


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def valid_dir(tmp_path: Path) -> Path:
    return write(
        tmp_path / "valid",
        {
            "proxy.toml": "[server]\nport = 8099\n",
            "tenants/default.toml": "[upstream]\nbase_url = 'http://127.0.0.1:1/v1'\n",
            "tenants/acme.toml": "api_keys = ['${CLI_ACME_KEY}']\n[upstream]\napi_key = 'sk'\n",
        },
    )


@pytest.fixture
def invalid_dir(tmp_path: Path) -> Path:
    return write(
        tmp_path / "invalid",
        {
            "proxy.toml": "[server]\nport = 0\ncolour = 'x'\n",
            "tenants/acme.toml": "[upstream]\nbase_url = 'ftp://x'\napi_key = '${CLI_MISSING_VAR}'\n",
            "tenants/beta.toml": "[upstream]\nbase_url = 'ftp://x'\n",
            "tenants/Bad.toml": "",
            "tenants/gamma.toml": "x = [\n",
        },
    )


@pytest.mark.parametrize("command", ENTRY_POINTS)
def test_config_check_valid(command: list[str], valid_dir: Path) -> None:
    result = run(command, "config", "check", "--config", str(valid_dir), env={"CLI_ACME_KEY": "pk-cli"})
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout
    assert "2 tenant(s): acme, default" in result.stdout
    assert str(valid_dir) in result.stdout
    assert "pk-cli" not in result.stdout + result.stderr
    assert result.stderr == ""


@pytest.mark.parametrize("command", ENTRY_POINTS)
def test_config_check_invalid_lists_every_error(command: list[str], invalid_dir: Path) -> None:
    result = run(command, "config", "check", "--config", str(invalid_dir))
    assert result.returncode != 0
    err = result.stderr
    for expected in (
        "proxy.toml: server.port:",
        "proxy.toml: server.colour: unknown key",
        "tenants/acme.toml: upstream.api_key: environment variable CLI_MISSING_VAR is not set",
        "tenants/beta.toml: upstream.base_url: must be an http(s) URL",
        "tenants/Bad.toml: tenant file names",
        "tenants/gamma.toml: invalid TOML",
    ):
        assert expected in err, f"{expected!r} not in stderr:\n{err}"
    error_lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(error_lines) == 6
    assert f"6 error(s) in {invalid_dir}" in err
    assert "OK" not in result.stdout


def test_config_check_uses_the_process_environment(valid_dir: Path) -> None:
    # Without CLI_ACME_KEY the same directory is invalid.
    result = run([sys.executable, "-m", "ctxproxy"], "config", "check", "--config", str(valid_dir))
    assert result.returncode == 1
    assert "tenants/acme.toml: api_keys[0]: environment variable CLI_ACME_KEY is not set" in result.stderr


def test_config_check_missing_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = run([sys.executable, "-m", "ctxproxy"], "config", "check", "--config", str(missing))
    assert result.returncode == 1
    assert f"error: no config directory at {missing}; create a starter one with `ctxproxy init {missing}`" in (
        result.stderr
    )


@pytest.mark.parametrize("missing", ["proxy.toml", "tenants/default.toml"])
def test_config_check_and_serve_refuse_a_directory_missing_a_required_file(tmp_path: Path, missing: str) -> None:
    root = write(tmp_path / "cfg", {"proxy.toml": "", "tenants/default.toml": ""})
    (root / missing).unlink()
    expected = "proxy.toml: file not found; create it" if missing == "proxy.toml" else "tenants/: no tenant files"
    result = run([sys.executable, "-m", "ctxproxy"], "config", "check", "--config", str(root))
    assert result.returncode == 1
    assert f"error: {expected}" in result.stderr
    assert f"1 error(s) in {root}" in result.stderr
    assert "OK" not in result.stdout
    result = run([sys.executable, "-m", "ctxproxy"], "serve", "--config", str(root), "--port", "1")
    assert result.returncode == 2
    assert f"error: {expected}" in result.stderr
    assert "not starting, 1 config error(s)" in result.stderr


def test_config_check_defaults_to_the_shipped_config_dir() -> None:
    # Run from the repository root: --config defaults to config/.
    result = run([sys.executable, "-m", "ctxproxy"], "config", "check")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("config: OK")
    assert "default" in result.stdout and "example" in result.stdout


@pytest.mark.parametrize("command", ENTRY_POINTS)
def test_serve_with_invalid_config_exits_2(command: list[str], invalid_dir: Path) -> None:
    result = run(command, "serve", "--config", str(invalid_dir), "--port", "1")
    assert result.returncode == 2
    assert "tenants/beta.toml: upstream.base_url" in result.stderr
    assert "CLI_MISSING_VAR" in result.stderr
    assert "not starting, 6 config error(s)" in result.stderr


def test_usage_errors() -> None:
    result = run([sys.executable, "-m", "ctxproxy"])
    assert result.returncode == 2
    assert "usage: ctxproxy" in result.stderr
    result = run([sys.executable, "-m", "ctxproxy"], "serve", "--port", "notaport")
    assert result.returncode == 2
    assert "--port" in result.stderr


def test_console_script_is_installed() -> None:
    if CONSOLE_SCRIPT is None:
        pytest.skip("ctxproxy console script not installed next to this interpreter")
    result = run([CONSOLE_SCRIPT], "--help")
    assert result.returncode == 0
    assert "serve" in result.stdout and "config" in result.stdout


def test_serve_takes_its_port_from_ctxproxy_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Docker image sets CTXPROXY_PORT, and its HEALTHCHECK reads the same variable."""
    from ctxproxy.cli import _parser

    monkeypatch.setenv("CTXPROXY_PORT", "9123")
    assert _parser().parse_args(["serve"]).port == 9123
    assert _parser().parse_args(["serve", "--port", "9200"]).port == 9200
    monkeypatch.delenv("CTXPROXY_PORT")
    assert _parser().parse_args(["serve"]).port is None

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
    command: list[str], *args: str, env: dict[str, str] | None = None, timeout: float = 20, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXAMPLE_", "CTXPROXY_"))}
    full_env.update(env or {})
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=full_env, check=False
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


@pytest.mark.parametrize("command", ["config check", "serve"])
def test_a_mistyped_config_directory_is_no_such_directory_before_any_offer(tmp_path: Path, command: str) -> None:
    """``--config mien`` is most often a typo of an existing directory: say that it does not
    exist, then how to create one there."""
    result = run([sys.executable, "-m", "ctxproxy"], *command.split(), "--config", "mien", cwd=tmp_path)
    assert result.returncode == (1 if command == "config check" else 2)
    assert result.stderr.splitlines() == [
        f"error: --config mien ({tmp_path / 'mien'}): no such directory. Check the path; "
        "to create a starter config there, run `ctxproxy init mien`."
    ]
    assert not (tmp_path / "mien").exists() and not (tmp_path / "data").exists()


def test_a_config_path_that_is_a_file_is_not_offered_init(tmp_path: Path) -> None:
    (tmp_path / "proxy.toml").write_text("")
    result = run([sys.executable, "-m", "ctxproxy"], "config", "check", "--config", str(tmp_path / "proxy.toml"))
    assert result.returncode == 1
    assert "not a directory; name the directory that holds proxy.toml and tenants/" in result.stderr
    assert "ctxproxy init" not in result.stderr


def test_config_check_without_a_config_directory_checks_the_built_in_starter(tmp_path: Path) -> None:
    result = run([sys.executable, "-m", "ctxproxy"], "config", "check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        f"the built-in starter config (no config/ in {tmp_path}; `ctxproxy init` writes it there to edit): "
        "OK (1 tenant(s): default)"
    )
    assert list(tmp_path.iterdir()) == []  # a check writes nothing, not even the store


def test_a_reader_that_stops_early_gets_no_traceback(valid_dir: Path) -> None:
    """``ctxproxy config check | head -1``: the reader closes the pipe before the output is written."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # gone before the command writes a byte: every write meets EPIPE
    try:
        result = subprocess.run(
            [sys.executable, "-m", "ctxproxy", "config", "check", "--config", str(valid_dir)],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=20, cwd=REPO,
            env={**os.environ, "CLI_ACME_KEY": "pk-cli"}, check=False,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 1  # the output was not all delivered


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
    assert f"not starting, 6 config error(s) in {invalid_dir}" in result.stderr


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


def test_help_says_which_apis_are_compacted_and_which_relayed() -> None:
    help_text = " ".join(run([sys.executable, "-m", "ctxproxy"], "--help").stdout.split())
    assert "OpenAI chat completions (/v1/chat/completions) and Anthropic Messages (/v1/messages) are compacted" in (
        help_text
    )
    assert "(the Responses API included) is relayed as it is" in help_text
    assert "OpenAI-compatible" not in help_text


def test_serve_takes_its_port_from_ctxproxy_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Docker image sets CTXPROXY_PORT, and its HEALTHCHECK reads the same variable."""
    from ctxproxy.cli import _parser

    monkeypatch.setenv("CTXPROXY_PORT", "9123")
    assert _parser().parse_args(["serve"]).port == 9123
    assert _parser().parse_args(["serve", "--port", "9200"]).port == 9200
    monkeypatch.delenv("CTXPROXY_PORT")
    assert _parser().parse_args(["serve"]).port is None

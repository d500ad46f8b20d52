"""``ctxproxy config check`` beyond OK / errors: warnings, and each tenant's windows with where they
come from, so that ``default_context_window`` versus the built-in table is never a surprise."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

from ctxproxy.cli import main
from ctxproxy.commands.check import print_windows
from ctxproxy.compaction.windows import BUILTIN_WINDOWS
from ctxproxy.config import load_config


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


def check(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["config", "check", "--config", str(root)])
    out, err = capsys.readouterr()
    return code, out, err


def test_windows_per_tenant_and_model_pattern(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write(
        tmp_path,
        {
            "proxy.toml": f'[store]\npath = "{tmp_path / "data"}"\n',
            "tenants/default.toml": "",
            "tenants/acme.toml": """
                default_context_window = 32000
                [compaction]
                strategy = "cut_point"
                summary_model = "my-ft-summariser"
                [models."my-ft-*"]
                context_window = 16384
                [models."gpt-4o*"]
                context_window = 64000
                """,
            "tenants/beta.toml": '[compaction]\nsummary_model = "gpt-4o-mini"\n',
        },
    )
    code, out, err = check(root, capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"{root}: OK (3 tenant(s): acme, beta, default)"
    assert lines[1].startswith(
        "windows (first match wins: the tenant's [models] patterns, the window the client asks for (client hints, "
        "below), the built-in table"
    )
    assert lines[2] == (
        '  acme: [models."my-ft-*"] 16384; [models."gpt-4o*"] 64000; summary model my-ft-summariser 16384 '
        '([models."my-ft-*"]); any other model 32000 (default_context_window; a model the built-in table knows '
        "keeps its own window)"
    )
    assert lines[3] == (
        "  beta: summary model gpt-4o-mini 128000 (built-in gpt-4o*); any other model 128000 (default_context_window)"
    )
    assert lines[4] == "  default: any other model 128000 (default_context_window)"
    assert lines[5] == "  built-in table:"
    table = " ".join(lines[6:])
    for pattern, tokens in BUILTIN_WINDOWS:
        assert f"{pattern} {tokens}" in table
    assert max(len(line) for line in lines[6:]) <= 100
    assert any(line.startswith("  client hints: a model name ending [<n>k] or [<n>m]") for line in lines[6:])


def test_a_summary_context_window_wins_for_the_summary_model(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {"proxy.toml": "", "tenants/a.toml": '[compaction]\nsummary_model = "x"\nsummary_context_window = 4096\n'},
    )
    out = io.StringIO()
    print_windows(load_config(root, {}), out)
    assert "  a: summary model x 4096 (summary_context_window); any other model 128000" in out.getvalue()


def test_warnings_go_to_stderr_and_do_not_fail_the_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write(
        tmp_path,
        {
            "proxy.toml": f'[store]\npath = "{tmp_path / "data"}"\n',
            "tenants/acme.toml": "[compaction]\nstrategy = 'rounds'\n[compaction.paged]\nactive_pages = 3\n",
            "tenants/acme.tml": "",
        },
    )
    code, out, err = check(root, capsys)
    assert code == 0
    assert out.startswith(f"{root}: OK (1 tenant(s): acme)")
    assert err.splitlines() == [
        "warning: tenants/acme.tml: not read: only tenants/*.toml files are tenants",
        "warning: tenants/acme.toml: compaction.paged: not used: this tenant's strategy is 'rounds', not 'paged'",
    ]


def test_errors_name_the_key_and_the_expected_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write(
        tmp_path,
        {
            "proxy.toml": '[server]\nport = "8080"\n',
            "tenants/acme.toml": "[compaction]\nstratgy = 'rounds'\n[upstream]\napi_key = '${OPENAI_API_KEY'\n",
            "tenants/notes.txt": "",
        },
    )
    code, out, err = check(root, capsys)
    assert code == 1 and out == ""
    assert err.splitlines() == [
        "warning: tenants/notes.txt: not read: only tenants/*.toml files are tenants",
        "error: proxy.toml: server.port: expected an integer, got the string '8080': write it without quotes",
        "error: tenants/acme.toml: upstream.api_key: unclosed or malformed ${...}: write ${VAR} or ${VAR:-fallback}, "
        "or $${ for a literal ${",
        f"2 error(s) in {root}",
    ]
    # (acme's misspelt key is reported once its file can be read: one pass per file.)
    (root / "tenants" / "acme.toml").write_text("[compaction]\nstratgy = 'rounds'\n")
    (root / "proxy.toml").write_text("")
    code, out, err = check(root, capsys)
    assert "error: tenants/acme.toml: compaction.stratgy: unknown key; did you mean `strategy`?" in err.splitlines()


def test_numbers_that_would_compact_every_turn_are_a_warning_saying_what_to_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write(
        tmp_path,
        {
            "proxy.toml": f'[store]\npath = "{tmp_path / "data"}"\n',
            "tenants/acme.toml": """
                [compaction]
                strategy = "cut_point"
                summary_max_tokens = 1200
                [compaction.cut_point]
                keep_recent_tokens = 1000
                reserve_tokens = 512
                [models."small-*"]
                context_window = 4096
                """,
        },
    )
    code, out, err = check(root, capsys)
    assert code == 0 and out.startswith(f"{root}: OK")
    [warning] = err.splitlines()
    assert warning.startswith(
        "warning: tenants/acme.toml: compaction.cut_point: too little room between compactions, at a 4096-token window"
    )
    assert "lower keep_recent_tokens to at most 654" in warning  # at the model's window, not the default 128000

"""A number or boolean written in quotes (``port = "8080"``) is refused, naming the key and the
type it should be; the same string from ``${VAR}`` is accepted (the environment only has strings).
An unclosed or malformed ``${`` is refused too, where it would otherwise be kept as text."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxproxy.config import load_config
from ctxproxy.config.interpolate import MALFORMED
from tests.config.dirs import config_dir, issues_of

TENANT = "tenants/acme.toml"


@pytest.mark.parametrize(
    ("file", "text", "key", "reason"),
    [
        ("proxy.toml", "[server]\nport = '8080'\n", "server.port", "expected an integer, got the string '8080'"),
        ("proxy.toml", "[server]\nread_timeout = '2.5'\n", "server.read_timeout", "expected a number, got"),
        ("proxy.toml", "[tokens]\nallow_download = 'true'\n", "tokens.allow_download", "expected true or false"),
        ("proxy.toml", "[defaults]\ndefault_context_window = '4096'\n", "defaults.default_context_window", "integer"),
        (TENANT, "[memory]\nenabled = 'yes'\n", "memory.enabled", "expected true or false"),
        (
            TENANT,
            "[compaction]\nstrategy = 'cut_point'\n[compaction.cut_point]\nreserve_tokens = '100'\n",
            "compaction.cut_point.reserve_tokens",
            "expected an integer, got the string '100'",
        ),
        (TENANT, '[models."ft-*"]\ncontext_window = "32768"\n', "models.ft-*.context_window", "expected an integer"),
    ],
)
def test_a_quoted_number_or_boolean_is_refused(tmp_path: Path, file: str, text: str, key: str, reason: str) -> None:
    [issue] = issues_of(config_dir(tmp_path, {file: text}))
    assert (issue.file, issue.key) == (file, key)
    assert reason in issue.reason
    assert issue.reason.endswith("write it without quotes")


def test_a_value_pydantic_cannot_read_is_reported_once(tmp_path: Path) -> None:
    [issue] = issues_of(config_dir(tmp_path, {"proxy.toml": "[server]\nport = 'eighty'\n"}))
    assert issue.key == "server.port"


def test_a_number_from_the_environment_is_accepted(tmp_path: Path) -> None:
    root = config_dir(
        tmp_path,
        {
            "proxy.toml": "[server]\nport = '${PORT}'\nread_timeout = '${READ:-12.5}'\n",
            TENANT: "[memory]\nenabled = '${MEMORY}'\n",
        },
    )
    config = load_config(root, {"PORT": "9090", "MEMORY": "true"})
    assert config.settings.server.port == 9090
    assert config.settings.server.read_timeout == 12.5
    assert config.tenants["acme"].memory.enabled is True


def test_a_literal_dollar_brace_is_still_a_plain_string(tmp_path: Path) -> None:
    # "$${" is a literal "${", not a substitution: a quoted number next to it is still refused.
    [issue] = issues_of(config_dir(tmp_path, {"proxy.toml": "[server]\nport = '$${8080}'\n"}))
    assert issue.key == "server.port"


@pytest.mark.parametrize(
    "value",
    ["${OPENAI_API_KEY", "sk-${KEY", "${}", "${1ABC}", "${KEY:-fallback", "Bearer ${ KEY }"],
)
def test_an_unclosed_or_malformed_reference_is_refused(tmp_path: Path, value: str) -> None:
    [issue] = issues_of(
        config_dir(tmp_path, {TENANT: f"[upstream]\napi_key = '{value}'\n"}), {"KEY": "k", "OPENAI_API_KEY": "k"}
    )
    assert (issue.file, issue.key) == ("tenants/acme.toml", "upstream.api_key")
    assert issue.reason == MALFORMED  # the same words whatever the value: it is never quoted (a key)
    assert issue.reason.startswith("unclosed or malformed ${...}: write ${VAR}")
    assert "$${" in issue.reason  # says how to write a literal one


def test_every_bad_reference_of_a_file_is_reported(tmp_path: Path) -> None:
    text = "api_keys = ['${UNSET_ONE}', '${BROKEN']\n[upstream]\napi_key = '${UNSET_TWO}'\n"
    root = config_dir(tmp_path, {TENANT: text})
    issues = issues_of(root)
    assert [(i.key, i.reason.split(":")[0]) for i in issues] == [
        ("api_keys[0]", "environment variable UNSET_ONE is not set"),
        ("api_keys[1]", "unclosed or malformed ${...}"),
        ("upstream.api_key", "environment variable UNSET_TWO is not set"),
    ]

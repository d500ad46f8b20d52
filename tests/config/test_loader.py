"""Loading a config directory: merging, ``${VAR}`` substitution, and errors that name file + key."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from ctxproxy.config import ConfigError, ConfigIssue, load_config
from ctxproxy.config.models import MIB

REPO_CONFIG = Path(__file__).resolve().parents[2] / "config"


def write(root: Path, proxy_toml: str | None = "", tenants: Mapping[str, str] | None = None) -> Path:
    (root / "tenants").mkdir(parents=True, exist_ok=True)
    if proxy_toml is not None:
        (root / "proxy.toml").write_text(textwrap.dedent(proxy_toml))
    for name, text in (tenants or {}).items():
        (root / "tenants" / name).write_text(textwrap.dedent(text))
    return root


def issues_of(root: Path, env: Mapping[str, str] | None = None) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as info:
        load_config(root, env or {})
    assert info.value.issues, "a ConfigError must carry at least one issue"
    # The exception text lists every issue, so a plain traceback is already useful.
    for issue in info.value.issues:
        assert str(issue) in str(info.value)
    return info.value.issues


def find(issues: list[ConfigIssue], file: str, key: str | None) -> ConfigIssue:
    matches = [i for i in issues if i.file == file and i.key == key]
    assert matches, f"no issue for {file} / {key} in {issues}"
    return matches[0]


# ------------------------------------------------------------------------------ valid directories


def test_valid_directory_loads_with_defaults_merged(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        """
        [server]
        port = 9123
        [defaults]
        api_keys = ["default-list-key"]
        [defaults.upstream]
        base_url = "https://defaults.example/v1"
        read_timeout = 123
        connect_timeout = 7
        headers = { "X-From-Defaults" = "1", "X-Shared" = "defaults" }
        """,
        {
            "acme.toml": """
                api_keys = ["acme-key-1", "acme-key-2"]
                [upstream]
                api_key = "sk-acme"
                read_timeout = 45
                headers = { "X-Shared" = "acme" }
                """,
            "plain.toml": """
                api_keys = []
                [upstream]
                base_url = "http://plain.local:9000/v1/"
                """,
        },
    )
    config = load_config(root, {})
    assert set(config.tenants) == {"acme", "plain"}
    assert config.settings.server.port == 9123
    assert config.settings.server.host == "127.0.0.1"  # built-in default kept

    acme = config.tenants["acme"]
    assert acme.name == "acme"
    # Tables merge key by key: the tenant overrides read_timeout, keeps base_url and connect_timeout.
    assert acme.upstream.base_url == "https://defaults.example/v1"
    assert acme.upstream.read_timeout == 45
    assert acme.upstream.connect_timeout == 7
    assert acme.upstream.api_key is not None and acme.upstream.api_key.get_secret_value() == "sk-acme"
    # Nested tables merge too: X-From-Defaults survives, X-Shared is the tenant's.
    assert acme.upstream.headers == {"X-From-Defaults": "1", "X-Shared": "acme"}
    # Lists are replaced, not concatenated.
    assert [k.get_secret_value() for k in acme.api_keys] == ["acme-key-1", "acme-key-2"]

    plain = config.tenants["plain"]
    assert plain.api_keys == []
    assert plain.upstream.base_url == "http://plain.local:9000/v1"  # trailing slash stripped
    assert plain.upstream.read_timeout == 123  # from [defaults]
    assert plain.upstream.api_key is None
    assert plain.compaction.strategy == "none"

    # Proxy keys are indexed by fingerprint, never by the secret itself.
    assert sorted(config.tenant_by_key.values()) == ["acme", "acme"]
    assert "acme-key-1" not in config.tenant_by_key


# ------------------------------------------------------------------------------ ${VAR}


def test_variables_replaced_from_the_given_env(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        """
        [store]
        path = "${DATA_DIR}/store"
        """,
        {
            "acme.toml": """
                api_keys = ["${ACME_PROXY_KEY}"]
                [upstream]
                base_url = "${ACME_URL}"
                api_key = "${ACME_UPSTREAM_KEY}"
                headers = { "X-Org" = "org-${ORG}-suffix" }
                """
        },
    )
    env = {
        "DATA_DIR": "/var/lib/ctx",
        "ACME_PROXY_KEY": "pk-123",
        "ACME_URL": "http://acme.local/v1",
        "ACME_UPSTREAM_KEY": "sk-up",
        "ORG": "42",
    }
    config = load_config(root, env)
    acme = config.tenants["acme"]
    assert config.settings.store.path == "/var/lib/ctx/store"
    assert acme.api_keys[0].get_secret_value() == "pk-123"
    assert acme.upstream.base_url == "http://acme.local/v1"
    assert acme.upstream.api_key is not None and acme.upstream.api_key.get_secret_value() == "sk-up"
    assert acme.upstream.headers == {"X-Org": "org-42-suffix"}


def test_env_mapping_is_used_not_the_process_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTX_TEST_ONLY_IN_OS", "from-os")
    write(tmp_path, "", {"a.toml": '[upstream]\napi_key = "${CTX_TEST_ONLY_IN_OS}"\n'})
    issue = find(issues_of(tmp_path, {}), "tenants/a.toml", "upstream.api_key")
    assert "CTX_TEST_ONLY_IN_OS" in issue.reason
    # Without an explicit mapping, os.environ is the source.
    tenant = load_config(tmp_path).tenants["a"]
    assert tenant.upstream.api_key is not None and tenant.upstream.api_key.get_secret_value() == "from-os"


@pytest.mark.parametrize(
    ("file", "text", "key"),
    [
        ("tenants/acme.toml", 'api_keys = ["ok", "${MISSING_PROXY_KEY}"]\n[upstream]\napi_key = "x"\n', "api_keys[1]"),
        ("tenants/acme.toml", '[upstream]\napi_key = "${MISSING_PROXY_KEY}"\n', "upstream.api_key"),
        ("proxy.toml", '[store]\npath = "${MISSING_PROXY_KEY}"\n', "store.path"),
        ("proxy.toml", '[defaults.upstream]\napi_key = "${MISSING_PROXY_KEY}"\n', "defaults.upstream.api_key"),
    ],
)
def test_unset_variable_names_file_key_and_variable(tmp_path: Path, file: str, text: str, key: str) -> None:
    write(tmp_path, "", {"acme.toml": ""})
    (tmp_path / file).write_text(text)
    issue = find(issues_of(tmp_path, {"OTHER": "1"}), file, key)
    assert "MISSING_PROXY_KEY" in issue.reason
    assert "not set" in issue.reason
    assert str(issue).startswith(f"{file}: {key}: ")


def test_every_unset_variable_in_a_file_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "", {"acme.toml": 'api_keys = ["${FIRST_MISSING}"]\n[upstream]\napi_key = "${SECOND_MISSING}"\n'})
    issues = issues_of(tmp_path)
    assert find(issues, "tenants/acme.toml", "api_keys[0]")
    assert find(issues, "tenants/acme.toml", "upstream.api_key")


def test_default_syntax_and_escapes(tmp_path: Path) -> None:
    write(
        tmp_path,
        '[store]\npath = "${CTX_DATA:-/srv/default-data}"\n',
        {
            "a.toml": """
                [upstream]
                base_url = "${A_URL:-http://fallback.local/v1}"
                headers = { "X-Literal" = "$${NOT_A_VAR}", "X-Empty-Default" = "<${EMPTY:-was-empty}>", "X-Set-Empty" = "<${SET_EMPTY}>", "X-Mixed" = "$${A}-${B:-b}" }
                """
        },
    )
    config = load_config(tmp_path, {"EMPTY": "", "SET_EMPTY": ""})
    headers = config.tenants["a"].upstream.headers
    assert config.settings.store.path == "/srv/default-data"
    assert config.tenants["a"].upstream.base_url == "http://fallback.local/v1"
    assert headers["X-Literal"] == "${NOT_A_VAR}"
    assert headers["X-Empty-Default"] == "<was-empty>"  # empty counts as unset for :-
    assert headers["X-Set-Empty"] == "<>"  # set but empty, no default: still a value
    assert headers["X-Mixed"] == "${A}-b"

    # A set variable wins over the fallback.
    config = load_config(tmp_path, {"CTX_DATA": "/from/env", "A_URL": "https://a.example/v1", "SET_EMPTY": "x"})
    assert config.settings.store.path == "/from/env"
    assert config.tenants["a"].upstream.base_url == "https://a.example/v1"


# ------------------------------------------------------------------------------ unknown keys, bad values


@pytest.mark.parametrize(
    ("file", "text", "key"),
    [
        ("proxy.toml", "[server]\nprot = 8080\n", "server.prot"),
        ("proxy.toml", "[stor]\npath = 'x'\n", "stor"),
        ("proxy.toml", "[defaults.upstream]\nbase_ulr = 'http://x/v1'\n", "defaults.upstream.base_ulr"),
        ("tenants/acme.toml", "[upstream]\nbase_url = 'http://x/v1'\napikey = 'sk'\n", "upstream.apikey"),
        ("tenants/acme.toml", "[compaction]\nstrategy = 'none'\nwindow = 3\n", "compaction.window"),
        ("tenants/acme.toml", "colour = 'blue'\n", "colour"),
    ],
)
def test_unknown_key_names_file_and_key(tmp_path: Path, file: str, text: str, key: str) -> None:
    write(tmp_path, "", {"acme.toml": ""})
    (tmp_path / file).write_text(text)
    issue = find(issues_of(tmp_path), file, key)
    assert issue.reason.startswith("unknown key")  # a did-you-mean may follow (test_key_hints.py)


@pytest.mark.parametrize(
    ("file", "text", "key", "words"),
    [
        ("proxy.toml", "[server]\nport = 0\n", "server.port", "greater than or equal to 1"),
        ("proxy.toml", "[server]\nport = 70000\n", "server.port", "less than or equal to 65535"),
        ("proxy.toml", "[server]\nport = 'eighty'\n", "server.port", "integer"),
        ("proxy.toml", f"[server]\nmax_body_bytes = {MIB - 1}\n", "server.max_body_bytes", str(MIB)),
        ("proxy.toml", "[server]\nlog_format = 'xml'\n", "server.log_format", "json"),
        ("proxy.toml", f"[server]\ncache_max_bytes = {MIB - 1}\n", "server.cache_max_bytes", str(MIB)),
        ("proxy.toml", "[store]\nbackend = 'memcached'\n", "store.backend", "'diskcache' or 'redis'"),
        ("proxy.toml", "[store]\nbackend = 'redis'\n", "store.url", "the redis store needs a url"),
        ("proxy.toml", "[store]\nbackend = 'redis'\nurl = 'http://cache:6379'\n", "store.url", "redis://"),
        ("proxy.toml", "[store]\nbackend = 'redis'\nurl = 'redis://:6379'\n", "store.url", "names no host"),
        ("proxy.toml", "[store]\nbackend = 'redis'\nurl = 'redis://r/zero'\n", "store.url", "database number"),
        ("proxy.toml", "[store]\nbackend = 'redis'\nurl = 'redis://r'\npool_size = 0\n", "store.pool_size", "1"),
        ("tenants/acme.toml", "[upstream]\nbase_url = 'ftp://x'\n", "upstream.base_url", "http(s) URL"),
        ("tenants/acme.toml", "[upstream]\nbase_url = 'not a url'\n", "upstream.base_url", "http(s) URL"),
        ("tenants/acme.toml", "[upstream]\nread_timeout = 0\n", "upstream.read_timeout", "greater than 0"),
        # Only the strategies that exist are accepted; the error lists them.
        ("tenants/acme.toml", "[compaction]\nstrategy = 'chapters'\n", "compaction.strategy", "paged"),
        ("tenants/acme.toml", "[compaction]\nstrategy = 'no_such_strategy'\n", "compaction.strategy", "none"),
        ("tenants/acme.toml", "api_keys = 'single-string'\n[upstream]\napi_key = 'x'\n", "api_keys", "list"),
    ],
)
def test_bad_value_names_the_key(tmp_path: Path, file: str, text: str, key: str, words: str) -> None:
    write(tmp_path, "", {"acme.toml": ""})
    (tmp_path / file).write_text(text)
    issue = find(issues_of(tmp_path), file, key)
    assert words in issue.reason


def test_max_body_bytes_at_the_minimum_is_accepted(tmp_path: Path) -> None:
    write(tmp_path, f"[server]\nmax_body_bytes = {MIB}\n", {"acme.toml": ""})
    assert load_config(tmp_path, {}).settings.server.max_body_bytes == MIB


def test_cache_max_bytes_defaults_to_64_mib(tmp_path: Path) -> None:
    write(tmp_path, "", {"acme.toml": ""})
    assert load_config(tmp_path, {}).settings.server.cache_max_bytes == 64 * MIB
    write(tmp_path, f"[server]\ncache_max_bytes = {MIB}\n")
    assert load_config(tmp_path, {}).settings.server.cache_max_bytes == MIB


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    write(tmp_path, "[server\nport = 1\n", {"good.toml": "", "broken.toml": "api_keys = [\n"})
    issues = issues_of(tmp_path)
    proxy_issue = find(issues, "proxy.toml", None)
    tenant_issue = find(issues, "tenants/broken.toml", None)
    assert "invalid TOML" in proxy_issue.reason
    assert "invalid TOML" in tenant_issue.reason
    assert not [i for i in issues if i.file == "tenants/good.toml"]


@pytest.mark.parametrize("name", ["Acme.toml", "my.tenant.toml", "_acme.toml", "ac me.toml", f"{'a' * 64}.toml"])
def test_bad_tenant_file_name(tmp_path: Path, name: str) -> None:
    write(tmp_path, "", {name: ""})
    issue = find(issues_of(tmp_path), f"tenants/{name}", None)
    assert "file names" in issue.reason


def test_longest_valid_tenant_name_and_non_toml_files_ignored(tmp_path: Path) -> None:
    write(tmp_path, "", {f"{'a' * 63}.toml": "", "README.md": "not toml [", "acme.toml.bak": "[["})
    assert list(load_config(tmp_path, {}).tenants) == ["a" * 63]


def test_name_key_in_tenant_file_rejected(tmp_path: Path) -> None:
    write(tmp_path, "", {"acme.toml": 'name = "other"\n'})
    issue = find(issues_of(tmp_path), "tenants/acme.toml", "name")
    assert "file name" in issue.reason


def test_api_keys_require_an_upstream_key(tmp_path: Path) -> None:
    write(tmp_path, "", {"acme.toml": 'api_keys = ["pk-1"]\n[upstream]\nbase_url = "http://x/v1"\n'})
    issue = find(issues_of(tmp_path), "tenants/acme.toml", "upstream.api_key")
    assert "api_keys" in issue.reason

    # An empty upstream key (e.g. "${KEY:-}" with KEY unset) counts as none.
    write(tmp_path, "", {"acme.toml": 'api_keys = ["pk-1"]\n[upstream]\napi_key = "${KEY:-}"\n'})
    find(issues_of(tmp_path), "tenants/acme.toml", "upstream.api_key")

    # ... and an upstream key from [defaults] satisfies it.
    write(tmp_path, '[defaults.upstream]\napi_key = "sk-shared"\n', {"acme.toml": 'api_keys = ["pk-1"]\n'})
    assert load_config(tmp_path, {}).tenants["acme"].api_keys


def test_empty_proxy_key_rejected(tmp_path: Path) -> None:
    write(tmp_path, "", {"acme.toml": 'api_keys = ["${ACME_KEY}"]\n[upstream]\napi_key = "sk"\n'})
    issue = find(issues_of(tmp_path, {"ACME_KEY": ""}), "tenants/acme.toml", "api_keys[0]")
    assert "empty" in issue.reason


def test_duplicate_proxy_key_across_tenants_rejected(tmp_path: Path) -> None:
    write(
        tmp_path,
        "",
        {
            "alpha.toml": 'api_keys = ["pk-alpha", "pk-shared"]\n[upstream]\napi_key = "sk-a"\n',
            "beta.toml": 'api_keys = ["pk-beta", "${SHARED}"]\n[upstream]\napi_key = "sk-b"\n',
        },
    )
    issues = issues_of(tmp_path, {"SHARED": "pk-shared"})
    issue = find(issues, "tenants/beta.toml", "api_keys[1]")
    assert "alpha" in issue.reason
    assert len(issues) == 1
    # The secret itself is not repeated in the error.
    assert "pk-shared" not in str(issue)


def test_errors_across_files_reported_together(tmp_path: Path) -> None:
    write(
        tmp_path,
        "[server]\nport = 0\nbogus = 1\n",
        {
            "alpha.toml": "[upstream]\nbase_url = 'ftp://x'\n",
            "beta.toml": "[upstream]\napi_key = '${BETA_KEY}'\n",
            "gamma.toml": "x = [\n",
            "ok.toml": "",
            "Bad.toml": "",
        },
    )
    issues = issues_of(tmp_path)
    where = {(i.file, i.key) for i in issues}
    assert {
        ("proxy.toml", "server.port"),
        ("proxy.toml", "server.bogus"),
        ("tenants/alpha.toml", "upstream.base_url"),
        ("tenants/beta.toml", "upstream.api_key"),
        ("tenants/gamma.toml", None),
        ("tenants/Bad.toml", None),
    } <= where
    assert not [i for i in issues if i.file == "tenants/ok.toml"]


def test_missing_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError) as info:
        load_config(missing, {})
    [issue] = info.value.issues
    assert issue.file == str(missing)
    assert "does not exist" in issue.reason

    # A file where a directory is expected is no better.
    (tmp_path / "afile").write_text("")
    with pytest.raises(ConfigError):
        load_config(tmp_path / "afile", {})


# ------------------------------------------------------------------------------ the shipped example


def test_shipped_example_config_validates_with_empty_env() -> None:
    config = load_config(REPO_CONFIG, {})
    assert {"default", "example"} <= set(config.tenants)
    default = config.tenants["default"]
    assert default.upstream.base_url == "https://api.openai.com/v1"
    assert default.upstream.api_key is None  # empty OPENAI_API_KEY → pass the client's key through
    assert config.settings.store.path == "data"
    assert config.settings.server.host == "127.0.0.1"
    assert config.tenants["example"].upstream.read_timeout == 300


def test_shipped_example_config_validates_with_env_set() -> None:
    env = {
        "CTXPROXY_HOST": "0.0.0.0",
        "CTXPROXY_DATA": "/var/lib/ctxproxy",
        "OPENAI_BASE_URL": "http://llm.internal:8000/v1",
        "OPENAI_API_KEY": "sk-shipped-secret",
        "EXAMPLE_BASE_URL": "https://example.internal/v1",
        "EXAMPLE_PROXY_KEY": "pk-example",
        "EXAMPLE_OPENAI_API_KEY": "sk-example",
    }
    config = load_config(REPO_CONFIG, env)
    default = config.tenants["default"]
    assert config.settings.server.host == "0.0.0.0"
    assert config.settings.store.path == "/var/lib/ctxproxy"
    assert default.upstream.base_url == "http://llm.internal:8000/v1"
    assert default.upstream.api_key is not None
    assert default.upstream.api_key.get_secret_value() == "sk-shipped-secret"
    assert config.tenants["example"].upstream.base_url == "https://example.internal/v1"


# ------------------------------------------------------------------------------ secrets


def test_secrets_never_in_repr_or_str(tmp_path: Path) -> None:
    write(
        tmp_path,
        "",
        {"acme.toml": 'api_keys = ["pk-very-secret-proxy"]\n[upstream]\napi_key = "sk-very-secret-upstream"\n'},
    )
    config = load_config(tmp_path, {})
    tenant = config.tenants["acme"]
    for text in (repr(tenant), str(tenant), repr(tenant.upstream), repr(config), tenant.model_dump_json()):
        assert "pk-very-secret-proxy" not in text
        assert "sk-very-secret-upstream" not in text
    assert "**" in repr(tenant.upstream.api_key)


def test_unset_variable_in_proxy_toml_does_not_cause_spurious_tenant_errors(tmp_path: Path) -> None:
    write(
        tmp_path,
        '[store]\npath = "${MISSING_DATA}"\n[defaults.upstream]\napi_key = "sk-shared"\n',
        {"acme.toml": 'api_keys = ["pk-1"]\n'},
    )
    issues = issues_of(tmp_path)
    assert [(i.file, i.key) for i in issues] == [("proxy.toml", "store.path")]

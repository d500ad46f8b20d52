"""``[store]``: the redis backend's url (interpolated, checked, never echoed with its password) and
what the store is opened with."""

from __future__ import annotations

from pathlib import Path

from ctxproxy.config import ConfigError, load_config


def write(root: Path, proxy_toml: str) -> Path:
    (root / "tenants").mkdir(parents=True, exist_ok=True)
    (root / "tenants" / "default.toml").write_text("")
    (root / "proxy.toml").write_text(proxy_toml)
    return root


def test_a_redis_store_takes_its_url_from_the_environment(tmp_path: Path) -> None:
    write(tmp_path, '[store]\nbackend = "redis"\nurl = "${REDIS_URL}"\nkey_prefix = "team-a:"\npool_size = 8\n')
    store = load_config(tmp_path, {"REDIS_URL": "redis://:s3cret@cache:6380/2"}).settings.store
    assert store.open_args() == {
        "backend": "redis",
        "path": "data",
        "url": "redis://:s3cret@cache:6380/2",
        "key_prefix": "team-a:",
        "pool_size": 8,
        "timeout": 2.0,
        "connect_timeout": 2.0,
    }
    assert "s3cret" not in repr(store)


def test_the_defaults_are_diskcache_without_a_url(tmp_path: Path) -> None:
    store = load_config(write(tmp_path, ""), {}).settings.store
    assert (store.backend, store.path, store.url, store.key_prefix) == ("diskcache", "data", None, "ctxproxy:")


def test_a_bad_url_is_reported_without_its_password(tmp_path: Path) -> None:
    write(tmp_path, '[store]\nbackend = "redis"\nurl = "${REDIS_URL}"\n')
    try:
        load_config(tmp_path, {"REDIS_URL": "http://:s3cret@cache:6379"})
    except ConfigError as exc:
        (issue,) = exc.issues
        assert issue.key == "store.url"
        assert "redis://" in issue.reason
        assert "s3cret" not in str(exc)
        assert "http://:***@cache:6379" in issue.reason
    else:
        raise AssertionError("a http:// url was accepted as a Redis URL")


def test_an_unset_redis_url_variable_is_named(tmp_path: Path) -> None:
    write(tmp_path, '[store]\nbackend = "redis"\nurl = "${REDIS_URL}"\n')
    try:
        load_config(tmp_path, {})
    except ConfigError as exc:
        assert "REDIS_URL" in str(exc)
    else:
        raise AssertionError("an unset ${REDIS_URL} was accepted")

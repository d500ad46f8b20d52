"""``[server] cors_origins``: origins as browsers send them, or ``"*"``; anything else is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxproxy.config import load_config
from tests.config.dirs import config_dir, issues_of


def write(root: Path, origins: str) -> Path:
    return config_dir(root, {"proxy.toml": f"[server]\ncors_origins = {origins}\n"})


def test_off_by_default(tmp_path: Path) -> None:
    assert load_config(config_dir(tmp_path), {}).settings.server.cors_origins == []


def test_origins_are_kept_as_browsers_send_them(tmp_path: Path) -> None:
    root = write(tmp_path, '["HTTPS://App.Example:443/", "http://localhost:3000", "*"]')
    assert load_config(root, {}).settings.server.cors_origins == ["https://app.example", "http://localhost:3000", "*"]


@pytest.mark.parametrize(
    "origin", ["app.example", "https://app.example/chat", "ftp://app.example", "https://app.example?x=1", "https://"]
)
def test_anything_but_an_origin_is_refused(tmp_path: Path, origin: str) -> None:
    [issue] = issues_of(write(tmp_path, f'["{origin}"]'))
    assert (issue.file, issue.key) == ("proxy.toml", "server.cors_origins")
    assert "must be an origin such as https://app.example" in issue.reason

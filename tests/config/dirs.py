"""Config directories for the loader's tests: written from TOML text, loaded, their issues read."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from ctxproxy.config import ConfigError, ConfigIssue, load_config


def config_dir(root: Path, files: Mapping[str, str] | None = None) -> Path:
    """``proxy.toml`` and ``tenants/acme.toml`` (both empty unless ``files`` says otherwise), and
    every other file ``files`` names, by path relative to ``root``."""
    for rel, text in {"proxy.toml": "", "tenants/acme.toml": "", **(files or {})}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def issues_of(root: Path, env: Mapping[str, str] | None = None) -> list[ConfigIssue]:
    with pytest.raises(ConfigError) as info:
        load_config(root, env or {})
    return info.value.issues

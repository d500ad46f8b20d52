"""The sample plugin (``tests/plugins/sample_plugin``), installed for real for the tests that ask for it.

Installing: the plugin's package is copied into a directory of its own, next to a
``<name>-<version>.dist-info`` holding ``METADATA`` and an ``entry_points.txt`` written from the
entry points its ``pyproject.toml`` declares — the files a wheel installer writes. Each test
that uses it puts that directory on ``sys.path`` (undone after the test), so ctxproxy finds the
plugin through ``importlib.metadata.entry_points`` exactly as it finds one pip installed.

Why not ``pip install -e`` into the running venv: that venv is shared (other checkouts' tests
would load the sample plugin, and an editable install would outlive this checkout), pip would
need a build backend with ``wheel`` at test time (not in the venv), and every later test in the
session would see the plugin, so tests would depend on their order. Here only the tests that
ask for ``sample_plugin`` see it.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from tests.plugins.sample import SOURCE, install


@pytest.fixture(scope="session")
def sample_plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("sample_plugin_site")
    install(SOURCE, site)
    return site


@pytest.fixture
def sample_plugin(sample_plugin_site: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The sample plugin, installed for this test; its hooks module (``EVENTS``, emptied)."""
    monkeypatch.syspath_prepend(str(sample_plugin_site))
    hooks = importlib.import_module("ctxproxy_sample.hooks")
    hooks.EVENTS.clear()
    return hooks

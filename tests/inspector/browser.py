"""Finding a Chromium to drive: never downloaded, always the machine's own.

``CTXPROXY_CHROMIUM`` names one; else the first of Debian's ``chromium`` (what ``.ci/run``
installs with ``apt-get install -y chromium``) and its usual other names found on ``PATH``.
Without one, or without the ``playwright`` package (the ``[test]`` extra), the browser tests
skip saying so — except under CI (``CI`` set), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL = "apt-get update && apt-get install -y chromium"


def find_chromium() -> str | None:
    named = os.environ.get("CTXPROXY_CHROMIUM")
    if named:
        return named if Path(named).exists() else shutil.which(named)
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def require_chromium() -> str:
    """The browser's path, or skip (fail under CI) with what to install."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        _missing("the playwright package is not installed: pip install -e '.[test]'")
    found = find_chromium()
    if found is None:
        _missing(f"no Chromium found (looked for {', '.join(NAMES)} and CTXPROXY_CHROMIUM): {INSTALL}")
    assert found is not None
    return found


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)

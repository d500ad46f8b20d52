"""A real diskcache Store in a temporary directory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ctxproxy.store import Store, open_store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = open_store("diskcache", tmp_path / "store")
    yield s
    await s.close()

"""Fixtures of the port tests: the fake upstream with its ``/v1`` base URL."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.upstream import FakeUpstream, start_fake_upstream


@pytest.fixture
async def fake(aiohttp_server: Any) -> tuple[FakeUpstream, str]:
    upstream, server = await start_fake_upstream(aiohttp_server)
    return upstream, str(server.make_url("/v1"))

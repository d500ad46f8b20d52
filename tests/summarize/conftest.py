"""Fixtures of the summariser tests: one token counter, a client session, the fake upstream."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from aiohttp.test_utils import TestServer

from ctxproxy.tokens import TokenCounter
from tests.fakes.upstream import FakeUpstream, start_fake_upstream


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    return TokenCounter()


@pytest.fixture
async def fake(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> tuple[FakeUpstream, str]:
    """The fake OpenAI upstream and its base URL (``http://127.0.0.1:PORT/v1``)."""
    upstream, server = await start_fake_upstream(aiohttp_server)
    return upstream, str(server.make_url("/v1"))

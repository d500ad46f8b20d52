"""Fixtures of the tests that run ctxproxy on a real Redis (``tests/redis_server.py``), and the fake
upstream's summary calls counted (``summaries``)."""

import pytest

from tests.conftest import Upstream
from tests.redis.summaries import Summaries
from tests.redis_server import own_redis, redis_server

__all__ = ["own_redis", "redis_server", "summaries"]


@pytest.fixture
def summaries(upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> Summaries:
    return Summaries(upstream.fake, monkeypatch)

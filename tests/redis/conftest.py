"""Fixtures of the tests that run ctxproxy on a real Redis (``tests/redis_server.py``)."""

from tests.redis_server import own_redis, redis_server

__all__ = ["own_redis", "redis_server"]

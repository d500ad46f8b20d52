"""``RedisLock``: ``RedisStore``'s lease (see ``ctxproxy.store.base`` for the contract).

The record is a Redis string under ``key_prefix`` + ``lease_record_key(name)`` holding the owner's
random token, with the lease's ttl as its expiry: taken with ``SET NX PX`` and an ``INCR`` of the
store's fencing counter in one script, renewed and released by scripts that compare the token
first (Redis runs a script atomically), so a holder whose lease expired and was taken by another
never extends or deletes the new owner's record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from redis.asyncio import Redis

from ctxproxy.store.keys import FENCE_KEY, lease_record_key
from ctxproxy.store.polled_lock import PolledLock
from ctxproxy.store.values import milliseconds

if TYPE_CHECKING:
    from ctxproxy.store.redis_store import RedisStore

__all__ = ["LeaseScripts", "RedisLock"]

_ACQUIRE: Final = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('INCR', KEYS[2])
end
return 0
"""
_RENEW: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""


class LeaseScripts:
    """The compare-then-act scripts of one client (sent once, then run by their hash)."""

    def __init__(self, redis: Redis) -> None:
        self.acquire = redis.register_script(_ACQUIRE)
        self.renew = redis.register_script(_RENEW)
        self.release = redis.register_script(_RELEASE)


class RedisLock(PolledLock):
    def __init__(self, store: RedisStore, scripts: LeaseScripts, key: str, ttl: float) -> None:
        super().__init__(key, ttl)
        self._store = store
        self._scripts = scripts
        self._record = store._key(lease_record_key(key))
        self._counter = store._key(FENCE_KEY)

    async def _take(self, token: str) -> int | None:
        async with self._store._op("lock.acquire", self._key):
            fence = await self._scripts.acquire(
                keys=[self._record, self._counter], args=[token, milliseconds(self._ttl)]
            )
        return int(fence) or None

    async def _extend(self, token: str) -> bool:
        async with self._store._op("lock.renew", self._key):
            return bool(await self._scripts.renew(keys=[self._record], args=[token, milliseconds(self._ttl)]))

    async def _give_up(self, token: str) -> None:
        async with self._store._op("lock.release", self._key):
            await self._scripts.release(keys=[self._record], args=[token])

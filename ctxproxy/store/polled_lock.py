"""``PolledLock``: what every backend's lease does alike (see ``ctxproxy.store.base`` for the contract).

A lease is a record under a reserved key holding a random owner token, expiring ``ttl`` seconds
after it was taken or last renewed. A backend brings three conditional writes, each atomic in the
backend: ``_take`` (set the record if absent, or abandoned, and draw the next fencing token
from the store's counter in the same atomic step), ``_extend`` (re-arm it if it still
carries the token) and ``_give_up`` (delete it if it still carries the token). Every successful
take uses a fresh token, so renewing or releasing after the lease expired, and someone else took
it, changes nothing. Blocking acquisition polls ``_take`` with jittered exponential backoff.
"""

from __future__ import annotations

import asyncio
import math
import random
import secrets
import time
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Final, Self

from ctxproxy.store.base import LockTimeout

__all__ = ["PolledLock"]

_LOCK_POLL_MIN: Final = 0.005
_LOCK_POLL_MAX: Final = 0.1


class PolledLock(ABC):
    def __init__(self, key: str, ttl: float) -> None:
        self._key = key
        self._ttl = ttl
        self._token: str | None = None
        self._expires = 0.0
        self._fence: int | None = None

    @abstractmethod
    async def _take(self, token: str) -> int | None:
        """Set the record to ``token`` if it is absent (or its holder is known gone) and return the
        next fencing token; None (and nothing changed) if another holds the lease."""

    @abstractmethod
    async def _extend(self, token: str) -> bool:
        """Re-arm the record for ``ttl`` seconds if it still carries ``token``."""

    @abstractmethod
    async def _give_up(self, token: str) -> None:
        """Delete the record if it still carries ``token``."""

    @property
    def key(self) -> str:
        return self._key

    @property
    def ttl(self) -> float:
        return self._ttl

    @property
    def held(self) -> bool:
        return self._token is not None and time.monotonic() < self._expires

    @property
    def fence(self) -> int | None:
        return self._fence

    async def acquire(self, *, blocking: bool = True, timeout: float | None = None) -> bool:
        if self.held:
            raise RuntimeError(f"lock {self._key!r} is already held by this {type(self).__name__}")
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = _LOCK_POLL_MIN
        while not await self._try_once():
            remaining = math.inf if deadline is None else deadline - time.monotonic()
            if not blocking or remaining <= 0:
                return False
            await asyncio.sleep(min(delay * (0.5 + random.random() / 2), remaining))
            delay = min(delay * 2, _LOCK_POLL_MAX)
        return True

    async def _try_once(self) -> bool:
        token, started = secrets.token_hex(16), time.monotonic()
        fence = await self._take(token)
        if fence is None:
            return False
        self._token, self._expires, self._fence = token, started + self._ttl, fence
        return True

    async def renew(self) -> bool:
        token, started = self._token, time.monotonic()
        if token is None:
            return False
        if await self._extend(token):
            self._expires = started + self._ttl
            return True
        if self._token == token:
            self._token = None
        return False

    async def release(self) -> None:
        token, self._token = self._token, None
        if token is not None:
            await self._give_up(token)

    async def __aenter__(self) -> Self:
        if not await self.acquire(blocking=True, timeout=self._ttl):
            raise LockTimeout(
                f"lock.acquire failed for key {self._key!r}: still held by another owner after {self._ttl:g}s"
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()

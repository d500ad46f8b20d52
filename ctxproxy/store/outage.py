"""A network store that cannot be reached: fail fast for a moment, and say so once per interval.

While a server is down every command would wait for its connection to be refused, and while it
hangs every command would wait its whole timeout, one after another on each request's path. So
after a failure to reach the server (not a refusal by a working one: a full memory, a wrong
type), operations fail at once for ``cooldown`` seconds; the first one after that tries the
server again, and a success closes the outage. The requests go on without the store meanwhile
(every caller already treats ``StoreError`` so), and the log says ``store.unreachable`` once
when the outage starts, ``store.still_unreachable`` with the count of failed operations at most
once per ``log_every`` seconds, and ``store.reachable_again`` when it ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog

from ctxproxy.store.base import StoreError, StoreUnavailable

__all__ = ["Outage", "warn_store_failure"]

log = structlog.get_logger(__name__)


def warn_store_failure(logger: Any, exc: StoreError, event: str, **fields: Any) -> None:
    """``logger.warning(event, **fields)`` for a caller whose store operation failed, except for a
    ``StoreUnavailable``: that outage is logged by the store, once per interval, not per request."""
    if not isinstance(exc, StoreUnavailable):
        logger.warning(event, **fields)


class Outage:
    """The state of one store's connection to its server. Event-loop use only."""

    def __init__(
        self,
        where: str,
        *,
        cooldown: float = 1.0,
        log_every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._where = where
        self._cooldown = cooldown
        self._log_every = log_every
        self._clock = clock
        self._since: float | None = None  # when the outage started; None: the server is reachable
        self._retry_at = 0.0
        self._logged_at = 0.0
        self._failed = 0  # operations failed since the last log line
        self._why = ""

    @property
    def down(self) -> bool:
        return self._since is not None

    def check(self, op: str, key: str) -> None:
        """Raise ``StoreError`` at once while the outage's cooldown runs."""
        if self._since is None:
            return
        now = self._clock()
        if now >= self._retry_at:
            return  # this one tries the server again
        self._count(now)
        raise StoreUnavailable(
            f"{op} failed for key {key!r}: the store at {self._where} is unreachable "
            f"for {now - self._since:.1f}s ({self._why}); next try in {self._retry_at - now:.1f}s"
        )

    def failed(self, why: str) -> None:
        """An operation could not reach the server."""
        now = self._clock()
        self._why = why
        self._retry_at = now + self._cooldown
        if self._since is None:
            self._since, self._logged_at, self._failed = now, now, 0
            log.warning("store.unreachable", store=self._where, error=why)
            return
        self._count(now)

    def worked(self) -> None:
        """An operation reached the server."""
        if self._since is None:
            return
        log.info("store.reachable_again", store=self._where, down_s=round(self._clock() - self._since, 1))
        self._since = None

    def _count(self, now: float) -> None:
        self._failed += 1
        if now - self._logged_at >= self._log_every:
            log.warning(
                "store.still_unreachable",
                store=self._where,
                down_s=round(now - (self._since or now), 1),
                failed_operations=self._failed,
                error=self._why,
            )
            self._logged_at, self._failed = now, 0

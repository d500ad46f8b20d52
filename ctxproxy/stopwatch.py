"""Where one request's time goes: ctxproxy's own work, or waiting on others.

The request middleware times each request (``timing``). Code that waits on others marks that
time without knowing which request it serves: the upstream port around each call
(``upstream_call``, which also notes when the answer's headers arrived), the compaction runner
around a summary (``own_work``). ``Stopwatch.away`` is the union of those spans, so overlapping
ones (a summary in the background while the upstream answers) count once, and
``elapsed - away`` is what ctxproxy itself took. Upstream calls made inside ``own_work`` (a
summary's, an embedding's) are not the client's answer: their first byte is not noted. Plugins'
hooks that may decide something (``plugin_hooks``: ``before_compact``, ``before_fork``) are waited
on too, and their time is also summed apart (``hooks``), so the request's log line can say what
they cost it.

The stopwatch travels in a ``ContextVar``, as structlog's bound fields do: a task started during
the request (a compaction) inherits it, and a request never sees another's. Outside a request
(a test driving the engine alone, a compaction that outlives its request) nothing is timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

__all__ = [
    "Stopwatch",
    "UpstreamSpan",
    "own_work",
    "plugin_hooks",
    "start_timing",
    "stop_timing",
    "timing",
    "upstream_call",
    "waiting",
]


class Stopwatch:
    """One request's clock: when it started, and the union of its spans spent waiting."""

    __slots__ = ("started", "first_bytes", "hooks", "_away", "_open", "_since", "_stopped")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first_bytes: list[float] = []  # seconds from each upstream call's start to its answer's headers
        self.hooks = 0.0  # seconds spent waiting on plugins' hooks while the request ran
        self._away = 0.0
        self._open = 0
        self._since = 0.0
        self._stopped: float | None = None

    def enter(self) -> None:
        if self._open == 0:
            self._since = time.perf_counter()
        self._open += 1

    def leave(self) -> None:
        self._open -= 1
        if self._open == 0 and self._stopped is None:
            self._away += time.perf_counter() - self._since

    def stop(self) -> None:
        """The request is over: spans still open count up to now, and nothing after it counts."""
        if self._stopped is None:
            now = self._stopped = time.perf_counter()
            if self._open:
                self._away += now - self._since

    @property
    def elapsed(self) -> float:
        end = self._stopped if self._stopped is not None else time.perf_counter()
        return end - self.started

    @property
    def away(self) -> float:
        """Seconds spent waiting on others (upstream calls, summaries), overlaps counted once."""
        if self._open and self._stopped is None:
            return self._away + time.perf_counter() - self._since
        return self._away

    @property
    def own(self) -> float:
        """Seconds ctxproxy itself took: elapsed minus away."""
        return max(0.0, self.elapsed - self.away)


_CURRENT: ContextVar[Stopwatch | None] = ContextVar("ctxproxy_stopwatch", default=None)
_OWN_WORK: ContextVar[bool] = ContextVar("ctxproxy_own_work", default=False)


@contextmanager
def timing() -> Iterator[Stopwatch]:
    """Time the request running in this context (the middleware's)."""
    watch, token = start_timing()
    try:
        yield watch
    finally:
        stop_timing(watch, token)


def start_timing() -> tuple[Stopwatch, Token[Stopwatch | None]]:
    """``timing`` without its generator, for the request middleware (one call, not four): the
    caller hands both to ``stop_timing`` in a ``finally``."""
    watch = Stopwatch()
    return watch, _CURRENT.set(watch)


def stop_timing(watch: Stopwatch, token: Token[Stopwatch | None]) -> None:
    watch.stop()
    _CURRENT.reset(token)


@contextmanager
def waiting() -> Iterator[None]:
    """The block waits on others: its time is the current request's ``away``."""
    watch = _CURRENT.get()
    if watch is None:
        yield
        return
    watch.enter()
    try:
        yield
    finally:
        watch.leave()


@contextmanager
def own_work() -> Iterator[None]:
    """The block waits on work ctxproxy does for itself (a summary, an embedding): ``waiting``,
    and upstream calls in it are not the client's answer."""
    token = _OWN_WORK.set(True)
    try:
        with waiting():
            yield
    finally:
        _OWN_WORK.reset(token)


@contextmanager
def plugin_hooks() -> Iterator[None]:
    """The block waits on plugins' hooks (``waiting``); its time while the request runs is also
    added to the request's ``hooks``."""
    watch = _CURRENT.get()
    started = time.perf_counter()
    try:
        with waiting():
            yield
    finally:
        if watch is not None and watch._stopped is None:
            watch.hooks += time.perf_counter() - started


class UpstreamSpan:
    """One upstream call's span of the current request's stopwatch, as ``upstream_call`` keeps it,
    for a caller that enters and leaves it itself (``enter``, ``answered`` when the answer's
    headers arrive, ``leave``): the upstream port's call, without a generator's frames."""

    __slots__ = ("_watch", "_started", "_noted")

    def __init__(self) -> None:
        self._watch = _CURRENT.get()
        self._noted: list[float] | None = None

    def enter(self) -> None:
        watch = self._watch
        if watch is not None:
            self._started = time.perf_counter()
            self._noted = watch.first_bytes if not _OWN_WORK.get() else None
            watch.enter()

    def answered(self) -> None:
        if self._noted is not None:
            self._noted.append(time.perf_counter() - self._started)

    def leave(self) -> None:
        if self._watch is not None:
            self._watch.leave()


@contextmanager
def upstream_call() -> Iterator[Callable[[], None]]:
    """The block is one upstream call (``waiting``); call what it yields when the answer's
    headers arrive, to note its first byte."""
    span = UpstreamSpan()
    span.enter()
    try:
        yield span.answered
    finally:
        span.leave()

"""The compaction engine's share of a request: CPU of ``Compactor.prepare`` and of its Store read.

    .venv/bin/python bench/engine_path.py                            # none, ~100 and ~3,000 messages, 8k window
    .venv/bin/python bench/engine_path.py --window 2000000           # a window the session never reaches

Runs ``bench/hotpath.py`` (same options: the in-process app, upstream and client, the synthetic
LoCoMo history) without the profiler, and times each measured request's ``Compactor.prepare``
and ``SessionViews.load`` by the process's CPU (all threads: the Store read runs in one of its
own) from the call to its return — nothing else runs meanwhile, the client waiting for the
answer. Prints median and mean per size; the mean carries the compactions among the requests
(an emergency one at the 8k window, about one in 40 at ~3,000 messages). Copy it into a
worktree of older code to time that (it reads only ``ctxproxy.compaction``'s two names).
"""

from __future__ import annotations

import functools
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]
import hotpath  # noqa: E402

from ctxproxy.compaction.engine import Compactor  # noqa: E402
from ctxproxy.compaction.views import SessionViews  # noqa: E402


class Timed:
    """CPU per call of the wrapped coroutine functions, while ``measuring``."""

    def __init__(self) -> None:
        self.measuring = False
        self.samples: dict[str, list[float]] = {}

    def wrap(self, owner: type, name: str) -> None:
        call: Callable[..., Awaitable[Any]] = getattr(owner, name)
        self.samples[name] = []

        @functools.wraps(call)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return await call(*args, **kwargs)
            finally:
                if self.measuring:
                    self.samples[name].append(time.process_time() - started)

        setattr(owner, name, timed)

    def report(self) -> None:
        for name, samples in self.samples.items():
            if samples:
                median, mean = 1e6 * statistics.median(samples), 1e6 * statistics.fmean(samples)
                print(f"- `{name}`: median {median:.0f} µs, mean {mean:.0f} µs per call ({len(samples)} calls)")
            samples.clear()
        print()


def main() -> None:
    timed = Timed()
    timed.wrap(Compactor, "prepare")
    timed.wrap(SessionViews, "load")
    batch = hotpath.Collections  # made right before a size's measured requests

    class Measuring(batch):  # type: ignore[misc,valid-type]
        def __init__(self) -> None:
            super().__init__()
            timed.measuring = True

    report = hotpath.report  # called right after them

    def reported(*args: Any) -> None:
        timed.measuring = False
        report(*args)
        timed.report()

    hotpath.Collections = Measuring
    hotpath.report = reported
    if "--no-profile" not in sys.argv:
        sys.argv.append("--no-profile")
    hotpath.main()


if __name__ == "__main__":
    main()

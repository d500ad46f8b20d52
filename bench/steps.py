"""The request path's steps, each timed by the thread's CPU: what a request that does not compact
spends in identifying, parsing, the compaction engine and the cache-prefix measure.

    .venv/bin/python bench/steps.py                      # strategy none, ~3,000 messages, 8k window, 300 requests
    .venv/bin/python bench/steps.py --sizes 100 3000 --requests 200
    .venv/bin/python bench/steps.py --steps ctxproxy.pipeline.run:identify ctxproxy.pipeline.run:measure

The workload is bench/hotpath.py's (the ctxproxy app, a diskcache store in a temporary directory,
a local upstream and the client in this process; the synthetic LoCoMo conversation resent whole
with one more user message each time); the bodies of the measured requests are made before
they are sent. Each step (``module:attribute``, a function or ``Class.method`` looked up where
the request path calls it) is wrapped to add the CPU time of its thread while it runs — a
coroutine's awaits left out — and the figures are per request, over the requests that did not
compact (a compaction's summary would swamp them): the median and the mean of each step, and
the median of the whole request in this process (client and upstream included). The wrappers
cost about a microsecond a call; compare figures of one run, or of alternating runs of two
trees (``--base-src DIR`` runs this script from DIR's code too, alternately).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import importlib
import inspect
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Generator
from pathlib import Path
from typing import Any

import aiohttp

# The tree whose ctxproxy (and bench helpers) run: this one, or ``--base-src``'s in the child runs.
ROOT = Path(os.environ.get("CTXPROXY_STEPS_SRC") or Path(__file__).resolve().parent.parent)
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
from hotpath import DEFAULT_DATA, served, workload  # noqa: E402

STEPS = (
    "ctxproxy.server.chat:parse_body",
    "ctxproxy.server.chat:run_turn",
    "ctxproxy.pipeline.run:identify",
    "ctxproxy.pipeline.identify:TokenCounter.count_each",
    "ctxproxy.compaction.engine:Compactor.prepare",
    "ctxproxy.compaction.views:SessionViews.load",
    "ctxproxy.pipeline.run:measure",
)


class Clock:
    """Thread CPU per step name, for the request under way."""

    def __init__(self) -> None:
        self.spent: dict[str, int] = defaultdict(int)

    def wrap(self, step: str) -> None:
        module_name, attribute = step.split(":")
        owner: Any = importlib.import_module(module_name)
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, name, self._timed(step, getattr(owner, name)))

    def _timed(self, step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        clock, spent = time.thread_time_ns, self.spent
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def timed_coroutine(*args: Any, **kwargs: Any) -> Any:
                return await _Stepped(fn(*args, **kwargs), step, spent)

            return timed_coroutine

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[step] += clock() - started

        return timed


class _Stepped:
    """Awaits a coroutine, adding the CPU of each of its runs between awaits to ``spent[step]``."""

    def __init__(self, coroutine: Awaitable[Any], step: str, spent: dict[str, int]) -> None:
        self._coroutine, self._step, self._spent = coroutine, step, spent

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self._coroutine.__await__()
        clock, sent, thrown = time.thread_time_ns, None, None
        while True:
            started = clock()
            try:
                yielded = inner.throw(thrown) if thrown is not None else inner.send(sent)
            except StopIteration as done:
                self._spent[self._step] += clock() - started
                return done.value
            except BaseException:
                self._spent[self._step] += clock() - started
                raise
            self._spent[self._step] += clock() - started
            thrown = None
            try:
                sent = yield yielded
            except BaseException as exc:  # handed on to the coroutine, as ``await`` would
                sent, thrown = None, exc


async def run(args: argparse.Namespace) -> None:
    from ctxproxy.logs import configure_logging

    clock = Clock()
    for step in args.steps:
        clock.wrap(step)
    configure_logging("json", "warning")
    convo, shape = workload(args)
    async with served(args) as url, aiohttp.ClientSession() as http:

        async def send(body: bytes) -> bool:
            async with http.post(url + shape.path, data=body, headers=dict(shape.headers)) as r:
                await r.read()
                if r.status != 200:
                    raise SystemExit(f"HTTP {r.status}")
                return r.headers.get("X-Ctx-Compacted") == "1"

        done = 0
        for size in sorted(args.sizes):
            first = next(i for i, p in enumerate(convo.points) if p >= size)
            for n in [
                *convo.points[done : first - 9 : args.stride],
                *convo.points[max(done, first - 9) : first],
            ]:
                await send(convo.body(n))
            bodies = [convo.body(n) for n in convo.points[first : first + args.requests]]
            done = first + args.requests
            await asyncio.sleep(0.6)  # the session recorder's flush
            gc.collect()
            await measure(send, bodies, clock, size)


async def measure(send: Callable[[bytes], Awaitable[bool]], bodies: list[bytes], clock: Clock, size: int) -> None:
    per_step: dict[str, list[int]] = defaultdict(list)
    whole: list[int] = []
    compacted = 0
    for body in bodies:
        clock.spent.clear()
        started = time.thread_time_ns()
        if await send(body):
            compacted += 1
            continue
        whole.append(time.thread_time_ns() - started)
        for step, spent in clock.spent.items():
            per_step[step].append(spent)
    kept = len(whole)
    print(
        f"\n## ~{size:,} messages: {kept} requests without a compaction ({compacted} compacted); the whole "
        f"request in this process (client, upstream, proxy): median {statistics.median(whole) / 1000:.0f} µs\n"
    )
    print("| step | median µs | mean µs |\n|---|---|---|")
    for step, values in sorted(per_step.items(), key=lambda kv: -statistics.median(kv[1])):
        values += [0] * (kept - len(values))  # a request that did not reach the step spent nothing in it
        print(f"| {step} | {statistics.median(values) / 1000:.1f} | {statistics.fmean(values) / 1000:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="locomo10.json (default: ../shared/data/)")
    parser.add_argument("--strategy", default="none")
    parser.add_argument("--sizes", type=int, nargs="+", default=[3000])
    parser.add_argument("--requests", type=int, default=300, help="measured requests per size")
    parser.add_argument("--stride", type=int, default=3, help="catch-up: every Nth user message")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--steps", nargs="+", default=list(STEPS), help="module:attribute to time")
    parser.add_argument("--base-src", default="", help="also run this script's workload on DIR's code, alternately")
    parser.add_argument("--rounds", type=int, default=3, help="with --base-src: alternating runs of each tree")
    args = parser.parse_args()
    if not args.base_src:
        asyncio.run(run(args))
        return
    forwarded = _without_values(sys.argv[1:], ("--base-src", "--rounds"))
    for n in range(args.rounds):
        for label, tree in (("base", Path(args.base_src).resolve()), ("this", ROOT)):
            print(f"\n# {label} ({tree}), round {n + 1}, load average {os.getloadavg()[0]:.2f}", flush=True)
            env = {**os.environ, "CTXPROXY_STEPS_SRC": str(tree)}
            subprocess.run([sys.executable, str(Path(__file__).resolve()), *forwarded], check=True, env=env)


def _without_values(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """``argv`` without ``options`` and the value after each."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in options:
            skip = True
        elif not arg.startswith(tuple(f"{o}=" for o in options)):
            out.append(arg)
    return out


if __name__ == "__main__":
    main()

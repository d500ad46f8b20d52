"""Where ctxproxy's CPU goes on one request, by function: a cProfile of the request path.

    .venv/bin/python bench/hotpath.py                          # strategy none, ~100 and ~3,000 messages
    .venv/bin/python bench/hotpath.py --strategy paged --sizes 3000 --top 40
    .venv/bin/python bench/hotpath.py --dump /tmp/hot.prof     # for snakeviz / pstats

The ctxproxy app (``create_app``, a diskcache store in a temporary directory) and a local
upstream run in this process; a client resends the synthetic LoCoMo conversation of
bench/compaction.py (every user message, the whole history through it) until the history reaches
each size, then ``--requests`` more under cProfile. The profile covers everything this process
does meanwhile — the client's and the upstream's aiohttp work too, alike for every ctxproxy
version — and the session-record flush after the requests. Prints, per size, the milliseconds
per request by function (own time and cumulative), the functions of ctxproxy first. Functions
are timed by the main thread's CPU (``--clock wall`` for wall time): a store's work in its
threads is not in the profile, only in the CPU per request of the headline.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import pstats
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
import _locomo  # noqa: E402
import _workloads  # noqa: E402
from _compaction_servers import Upstream  # noqa: E402
from _prompt_cost import ChatShape, Units  # noqa: E402

# What cProfile times functions by: the main thread's CPU (the default: a machine busy with
# other work then does not charge its preemptions to whichever function was running) or wall time.
CLOCKS = {"cpu": time.thread_time, "wall": time.perf_counter}

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo10.json"


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


def workload(args: argparse.Namespace) -> tuple[_workloads.Conversation, ChatShape]:
    """A synthetic LoCoMo conversation long enough for ``args.sizes`` and ``args.requests``, and the
    chat shape its requests are sent in."""
    every = _locomo.load(args.data)
    longest = max(args.sizes) + 4 * args.requests + 50
    conv = _workloads.locomo([_locomo.synthetic(every, longest)], Units(_workloads.MODEL), False)
    return conv.conversations[0], ChatShape(Units(_workloads.MODEL))


def write_config(root: Path, window: int, upstream_port: int, strategy: str) -> None:
    """The proxy's config in ``root``: a store in ``root/data``, one tenant on ``strategy``, the
    extractive summariser, compactions inline."""
    (root / "tenants").mkdir()
    (root / "proxy.toml").write_text(f'[server]\nlog_level = "warning"\n[store]\npath = "{root / "data"}"\n')
    (root / "tenants" / "default.toml").write_text(
        f"default_context_window = {window}\n"
        f'[upstream]\nbase_url = "http://127.0.0.1:{upstream_port}/v1"\n'
        f'[compaction]\nstrategy = "{strategy}"\nsummarizer = "extractive"\nmode = "inline"\n'
    )


@asynccontextmanager
async def served(args: argparse.Namespace) -> AsyncIterator[str]:
    """The ctxproxy app (``write_config``'s tenant) before the bench upstream, served on loopback:
    its URL; both stopped when the block ends."""
    from ctxproxy.config import ConfigHolder
    from ctxproxy.server.app import create_app

    upstream = Upstream()
    await upstream.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            write_config(root, args.window, upstream.port, args.strategy)
            runner, url = await serve(create_app(ConfigHolder.load(root, {})))
            try:
                yield url
            finally:
                await runner.cleanup()
    finally:
        await upstream.stop()


async def run(args: argparse.Namespace) -> None:
    from ctxproxy.logs import configure_logging

    configure_logging("json", "warning")
    convo, shape = workload(args)
    done = 0
    async with served(args) as url, aiohttp.ClientSession() as http:

        async def send(n: int) -> None:
            async with http.post(url + shape.path, data=convo.body(n), headers=dict(shape.headers)) as r:
                await r.read()
                if r.status != 200:
                    raise SystemExit(f"HTTP {r.status}: {(await r.read())[:300]!r}")

        for size in sorted(args.sizes):
            first = next(i for i, p in enumerate(convo.points) if p >= size)
            for n in convo.points[done : first : args.stride]:
                await send(n)
            batch = convo.points[first : first + args.requests]
            await asyncio.sleep(0.6)
            collected = Collections()
            gc.callbacks.append(collected.callback)
            profile = cProfile.Profile(CLOCKS[args.clock])
            t0, c0 = time.perf_counter(), time.process_time()
            if not args.no_profile:
                profile.enable()
            for n in batch:
                await send(n)
            await asyncio.sleep(0.6)  # the session recorder's flush
            profile.disable()
            gc.callbacks.remove(collected.callback)
            cpu = time.process_time() - c0
            done = first + len(batch)
            report(profile, size, len(batch), cpu, time.perf_counter() - t0, args, collected)


class Collections:
    """The garbage collector's runs meanwhile, by generation: how many, how long (cProfile
    charges them to whichever function allocated when one started)."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0

    def callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        self.count[info["generation"]] += 1
        self.seconds[info["generation"]] += time.perf_counter() - self._started


def report(
    profile: cProfile.Profile,
    size: int,
    requests: int,
    cpu: float,
    wall: float,
    args: argparse.Namespace,
    collected: Collections,
) -> None:
    print(
        f"\n## {args.strategy}, ~{size:,} messages: {1000 * cpu / requests:.2f} ms CPU per request "
        f"(this process: client, upstream and proxy; {requests} requests, {wall:.1f} s)\n"
    )
    runs = ", ".join(
        f"gen {g}: {n} ({1000 * s / requests:.2f} ms/request)"
        for g, (n, s) in enumerate(zip(collected.count, collected.seconds, strict=True))
    )
    print(f"Garbage collections meanwhile: {runs}.\n")
    if args.no_profile:
        return
    if args.dump:
        profile.dump_stats(f"{args.dump}.{args.strategy}.{size}")
    for sort, title in (("tottime", "own time"), ("cumulative", "cumulative")):
        out = io.StringIO()
        stats = pstats.Stats(profile, stream=out)
        stats.sort_stats(sort).print_stats(args.filter, args.top)
        lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
        start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
        print(f"### by {title} (filter {args.filter!r}, top {args.top}; seconds over all {requests} requests)\n")
        print("```")
        print("\n".join(lines[start:]))
        print("```\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="locomo10.json (default: ../shared/data/)")
    parser.add_argument("--strategy", default="none")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 3000])
    parser.add_argument("--requests", type=int, default=20, help="profiled requests per size")
    parser.add_argument("--stride", type=int, default=3, help="catch-up: every Nth user message")
    parser.add_argument("--window", type=int, default=8192)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--filter", default="", help="only functions whose file:line(name) matches this regex")
    parser.add_argument("--clock", choices=list(CLOCKS), default="cpu", help="cProfile timer (default: thread CPU)")
    parser.add_argument("--no-profile", action="store_true", help="only the CPU per request, without cProfile's cost")
    parser.add_argument("--dump", default="", help="also write each profile to DUMP.<strategy>.<size>")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

"""Where ctxproxy's CPU goes on a relayed request: a cProfile of bench/overhead.py's workload.

    .venv/bin/python bench/relayprof.py                  # 20 KB bodies, JSON and SSE, strategy none
    .venv/bin/python bench/relayprof.py --chars 2480 --modes sse --top 40
    .venv/bin/python bench/relayprof.py --upstream-process   # the upstream in a process of its own
    .venv/bin/python bench/relayprof.py --upstream-process --gap 1 --modes sse   # one event a read

The ctxproxy app (``create_app``, the shipped ``config/tenants/default.toml``, a diskcache store in
a temporary directory) and bench/overhead.py's upstream (``_servers.upstream_app``: a fixed
answer, or 20 SSE events, a usage chunk when asked for one and ``[DONE]``) run in this process;
the client sends overhead.py's body A (50 messages, ``--chars`` characters each; ~20 KB), each
request with a new last user message. Per mode: the CPU per request without the profiler, then
under cProfile (functions timed by the main thread's CPU) the function calls per request and the
functions of ctxproxy by own time and cumulative, as bench/hotpath.py prints them. The client's
and the upstream's work is in the process's figures too, alike for every ctxproxy version.
``--upstream-process`` runs the upstream as overhead.py does, in a process of its own (not in the
figures): its stream's events then reach the proxy one read at a time, as they do in production,
instead of all in one read; with ``--gap MS`` it pauses before each event, so each event is a
read of its own, as a model's tokens are. The loop is the one ``ctxproxy serve`` runs on
(uvloop's when it is installed, e.g. ``PYTHONPATH`` naming a directory it was installed to).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]
from _config import proxy_toml  # noqa: E402
from _procs import free_ports, start, stop, wait_ready  # noqa: E402
from _servers import upstream_app  # noqa: E402
from hotpath import Collections, report, serve  # noqa: E402
from overhead import make_body  # noqa: E402


async def run(args: argparse.Namespace) -> None:
    from ctxproxy.config import ConfigHolder
    from ctxproxy.logs import configure_logging
    from ctxproxy.server.app import create_app

    configure_logging("json", "warning")
    with tempfile.TemporaryDirectory() as tmp:
        if args.upstream_process:
            port = free_ports(1)[0]
            argv = [str(ROOT / "bench" / "_servers.py"), "upstream", "--port", str(port), "--gap", str(args.gap)]
            process = start("upstream", argv, port, Path(tmp))
            async with aiohttp.ClientSession() as http:
                await wait_ready(http, [process])
            upstream_url, upstream = process.url, None
        else:
            process = None
            upstream, upstream_url = await serve(upstream_app())
        root = Path(tmp)
        (root / "tenants").mkdir()
        extra = f'[defaults.upstream]\nbase_url = "{upstream_url}/v1"\n'
        (root / "proxy.toml").write_text(proxy_toml(root / "store", "warning", extra))
        shutil.copy(ROOT / "config" / "tenants" / "default.toml", root / "tenants" / "default.toml")
        proxy, url = await serve(create_app(ConfigHolder.load(root, {})))
        try:
            async with aiohttp.ClientSession() as http:
                for mode in args.modes:
                    await profile_mode(http, url, mode, args)
        finally:
            await proxy.cleanup()
            if upstream is not None:
                await upstream.cleanup()
            if process is not None:
                stop([process])


async def profile_mode(http: aiohttp.ClientSession, url: str, mode: str, args: argparse.Namespace) -> None:
    body = make_body("A", 50, args.chars, mode == "sse")
    uid = 0

    async def send() -> None:
        nonlocal uid
        uid += 1
        headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
        async with http.post(url + "/v1/chat/completions", data=body.build(uid), headers=headers) as r:
            await r.read()
            if r.status != 200:
                raise SystemExit(f"HTTP {r.status}: {(await r.read())[:300]!r}")

    for _ in range(args.warmup):
        await send()
    c0 = time.process_time()
    for _ in range(args.requests):
        await send()
    plain = (time.process_time() - c0) / args.requests
    collected = Collections()
    profile = cProfile.Profile(time.thread_time)
    t0, c0 = time.perf_counter(), time.process_time()
    profile.enable()
    for _ in range(args.requests):
        await send()
    profile.disable()
    print(f"\n# {mode}: {1000 * plain:.2f} ms CPU per request without the profiler (this process)")
    calls = sum(entry[1] for entry in pstats.Stats(profile).stats.values())  # type: ignore[attr-defined]
    print(f"function calls per request under the profiler: {calls / args.requests:.0f}")
    args.strategy = f"relay-{mode}"
    report(profile, 50, args.requests, time.process_time() - c0, time.perf_counter() - t0, args, collected)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", nargs="+", choices=["json", "sse"], default=["json", "sse"])
    parser.add_argument("--chars", type=int, default=380, help="characters per message (380: overhead.py's body A)")
    parser.add_argument("--requests", type=int, default=300, help="measured requests per mode, each way")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--filter", default="ctxproxy", help="only functions whose file:line(name) matches this regex")
    parser.add_argument("--dump", default="", help="also write each profile to DUMP.<mode>.<chars>")
    parser.add_argument("--upstream-process", action="store_true", help="run the upstream in a process of its own")
    parser.add_argument("--gap", type=float, default=0.0, help="with --upstream-process: ms before each stream event")
    parser.add_argument("--no-profile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from ctxproxy.server.runner import uvloop_factory

    factory = uvloop_factory()  # the loop `ctxproxy serve` runs on: uvloop's when installed
    print(f"event loop: {'asyncio' if factory is None else 'uvloop'}")
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(run(args))


if __name__ == "__main__":
    main()

"""Compaction priced as providers bill it: every strategy at four windows on LoCoMo and on a long
coding-agent session, in both protocols.

    .venv/bin/python bench/compaction.py            # ~10 minutes on 2 quiet cores (40+ when others load them)
    .venv/bin/python bench/compaction.py --quick    # 2 LoCoMo conversations, a short agent session: ~2 minutes

Data: ``--data`` (default ``../shared/data/locomo10.json`` next to the repository; LoCoMo is
CC BY-NC 4.0 and is read at run time, never copied here).

Workloads (``_workloads``): the ten LoCoMo conversations over chat completions (a request at every
user message), and one coding-agent session built from real tool output while the benchmark
starts (``_agent``: git, pytest, pip on this repository), replayed over chat completions and over
Anthropic's Messages. A stateless client resends the whole history at every request. Every
strategy runs at every window in its own ``python -m ctxproxy serve`` (fresh store, extractive
summariser, inline compaction, every option its default, ``[memory]`` as the strategy ships it),
whose one tenant has the window (8k, 32k, 128k, 200k: ``default_context_window``; the model name
matches no built-in window); all replays run at once. A local upstream inside this process records every forwarded
body, and everything is measured on what it received (``_prompt_cost``: units, cached prefix,
cost, floor; ``--cache-discount``, default 0.1).

Reported: the cost figure per workload (cost vs ``none`` and vs the floor, requests that extend
the previous prompt, the share of emergency compactions from the proxy's ``compaction`` log
events, prompts over the window); today's columns (forwarded share, peak, prefix kept,
cacheable share, compactions); the proxy's CPU per request; issue 22's aims; and, unless
``--no-cpu``, the proxy's CPU per request at ~100 and ~3,000 messages of history (``_compaction_cpu``,
8k window, one strategy at a time).

Options: ``--windows``, ``--strategies``, ``--workloads``, ``--conversations N``, ``--agent-tasks N``,
``--memory off`` (compaction alone), ``--identity`` (each LoCoMo conversation names its user and
scope, so ``rounds`` sends its User and Scope Memory), ``--cpu-samples``, ``--cpu-sizes``, ``--stride``,
``--quiet-wait`` (see ``--help``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import aiohttp

# A load generator that starts and samples its own processes: the few blocking subprocess and
# file calls inside coroutines run between measurements, never during one.
# ruff: noqa: ASYNC220, ASYNC240

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _agent  # noqa: E402
import _compaction_report as report  # noqa: E402
import _locomo  # noqa: E402
import _workloads  # noqa: E402
from _agent_facts import report_facts  # noqa: E402
from _compaction_cpu import CpuPoint, cpu_profile, report_cpu  # noqa: E402
from _compaction_servers import Proxy, Upstream, compaction_events, start_proxy, stop, wait_ready, write_config  # noqa: E402
from _prompt_cost import ChatShape, Units  # noqa: E402
from _replay import ReplayStats, attribute, replay  # noqa: E402

from ctxproxy.config import load_config  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10.json"
STRATEGIES = ("none", "sliding_window", "rolling_summary", "rounds", "cut_point", "paged")
WINDOWS = {"8k": 8192, "32k": 32768, "128k": 128_000, "200k": 200_000}
WORKLOADS = ("locomo", "agent")
CPU_WINDOW = {"default": 8192}
SMALL_BATCH = 20  # CPU profile: requests per session at the smallest history size


def tenant_of(window: int) -> str:
    return f"w{window}"


def code_state() -> str:
    """Which proxy code ran: git HEAD, whether ctxproxy/ has uncommitted changes, a hash of ctxproxy/*.py."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "ctxproxy").rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "ctxproxy"], cwd=ROOT, capture_output=True, text=True
        )
        where = head.stdout.strip() + (" + uncommitted changes in ctxproxy/" if dirty.stdout.strip() else "")
    except OSError:
        where = "unknown commit"
    return f"{where} (ctxproxy/*.py sha256 {digest.hexdigest()[:12]})"


def report_options(tmp: Path, strategies: Sequence[str], memory: str) -> None:
    """What the proxies run with, read back through ctxproxy's own config loader."""
    print("## Configuration\n")
    print(
        f"Model `{_workloads.MODEL}` (no built-in window applies); one tenant per window, "
        '`summarizer = "extractive"`, `mode = "inline"`, every strategy option its default (`None`: a default '
        "that scales with the window). LoCoMo requests carry "
        f"no `max_tokens`; the agent's carry {_workloads.AGENT_MAX_TOKENS}.\n"
    )
    print("| strategy | options (as loaded by `ctxproxy.config.load_config`) |")
    print("|---|---|")
    for strategy in strategies:
        directory = write_config(tmp / f"check-{strategy}", strategy, 1, {"check": 8192}, memory=memory)
        tenant = load_config(directory).tenants["check"]
        c = tenant.compaction
        options = c.options[strategy].model_dump() if strategy in c.options else {}
        options |= {"memory.enabled": tenant.memory.enabled, "memory.layered": tenant.memory.layered}
        print(f"| {strategy} | {', '.join(f'{k}={v}' for k, v in options.items()) or '-'} |")
    print()


def build_workloads(
    args: argparse.Namespace, every: list[_locomo.Conversation], units: Units
) -> list[_workloads.Workload]:
    out = []
    if "locomo" in args.workloads:
        out.append(_workloads.locomo(every[: args.conversations], units, args.identity))
    if "agent" in args.workloads:
        t0 = time.perf_counter()
        session = _agent.build(args.agent_tasks)
        print(
            f"(agent session: {len(session.steps)} steps, {session.requests} requests, {session.commands} commands "
            f"run in {time.perf_counter() - t0:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
        out += _workloads.agent(session, units)
    return out


async def replay_all(
    args: argparse.Namespace,
    tmp: Path,
    upstream: Upstream,
    workloads: list[_workloads.Workload],
    clients: dict[str, _workloads.ClientSide],
    windows: list[int],
) -> tuple[list[ReplayStats], dict[str, float], int]:
    """Every (strategy, window) in its own proxy (so the slowest strategy's windows share the cores),
    every workload replayed through each, all at once; the replays, each strategy's proxies' CPU
    seconds, and how many compaction events named no replayed session."""
    proxies: dict[tuple[str, str], Proxy] = {}
    timeout = aiohttp.ClientTimeout(total=3600)
    try:
        async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=256)) as http:
            for strategy in args.strategies:
                for window in windows:
                    name = f"replay-{strategy}-{tenant_of(window)}"
                    config = write_config(
                        tmp / name, strategy, upstream.port, {tenant_of(window): window}, "info", args.memory
                    )
                    proxies[(strategy, tenant_of(window))] = start_proxy(strategy, config, tmp / f"{name}.log")
            for p in proxies.values():
                await wait_ready(http, p)
            cpu0 = {key: p.cpu_seconds() for key, p in proxies.items()}
            jobs = [
                replay(http, proxies[(strategy, tenant_of(window))], tenant_of(window), window, upstream, w, units)
                for strategy in args.strategies
                for window in windows
                for w, units in ((w, clients[w.key].units) for w in workloads)
            ]
            results = list(await asyncio.gather(*jobs))
            await asyncio.sleep(0.6)  # the session recorders flush every 0.25 s
            cpu = dict.fromkeys(args.strategies, 0.0)
            for key, p in proxies.items():
                cpu[key[0]] += p.cpu_seconds() - cpu0[key]
            await asyncio.gather(*(s.facts.recall(http, upstream) for s in results))  # after the CPU: not in it
    finally:
        for p in proxies.values():
            stop(p)
    lost = sum(
        attribute([s for s in results if (s.strategy, s.tenant) == key], compaction_events(p.errlog))
        for key, p in proxies.items()
    )
    return results, cpu, lost


async def cpu_phase(args: argparse.Namespace, tmp: Path, upstream: Upstream, every: list[_locomo.Conversation]) -> None:
    sizes = sorted(args.cpu_sizes)
    need = max(sizes) + 4 * args.cpu_samples + 50
    sessions = -(-args.cpu_samples // SMALL_BATCH)
    units = Units(_workloads.MODEL)
    variants = [_locomo.synthetic(every[k % len(every) :] + every[: k % len(every)], need) for k in range(sessions)]
    synthetic = _workloads.locomo(variants, units, identified=False).conversations
    cpu: dict[str, list[CpuPoint]] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as http:
        for strategy in args.strategies:
            t0 = time.perf_counter()
            config = write_config(tmp / f"cpu-{strategy}", strategy, upstream.port, CPU_WINDOW, memory=args.memory)
            proxy = start_proxy(strategy, config, tmp / f"cpu-{strategy}.log")
            try:
                await wait_ready(http, proxy)
                cpu[strategy] = await cpu_profile(
                    http, proxy, upstream, ChatShape(units), synthetic, sizes, args.cpu_samples, args.stride, units,
                    args.quiet_wait,
                )  # fmt: skip
            finally:
                stop(proxy)
            print(f"(cpu {strategy}: {time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    report_cpu(cpu, len(variants[0].messages), args.cpu_samples, args.stride, args.quick, args.quiet_wait)


async def main_async(args: argparse.Namespace, every: list[_locomo.Conversation]) -> int:
    command = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.executable, ROOT), *sys.argv])
    print(f"# ctxproxy compaction benchmark\n\ncommand: `{command}` (cwd {ROOT}), {time.strftime('%Y-%m-%d')}\n")
    print(
        f"Python {platform.python_version()}, aiohttp {aiohttp.__version__}, {os.cpu_count()} cores "
        f"(affinity {len(os.sched_getaffinity(0))}), {platform.system()} {platform.release()}. Data: "
        f"{args.data} (LoCoMo, Maharana et al. 2024, CC BY-NC 4.0; read at run time, not copied). "
        f"ctxproxy code: {code_state()}.\n"
    )
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="ctxproxy-compaction-"))
    upstream = Upstream()
    await upstream.start()
    try:
        if args.cpu_only:
            await cpu_phase(args, tmp, upstream, every)
            return 0
        units = Units(_workloads.MODEL)
        workloads = build_workloads(args, every, units)
        windows = [WINDOWS[w] for w in args.windows]
        clients = {w.key: _workloads.client_side(w) for w in workloads}
        report_options(tmp, args.strategies, args.memory)
        results, cpu, lost = await replay_all(args, tmp, upstream, workloads, clients, windows)
        print(f"(replay: {time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        run = report.Run(
            workloads,
            clients,
            args.strategies,
            windows,
            {(s.workload, s.strategy, s.window): s for s in results},
            args.cache_discount,
        )
        report.report_figure(run)
        report.report_aims(run)
        report.report_details(run)
        report_facts(
            [
                (s.workload, report.window_name(s.window), s.strategy, s.facts)
                for s in sorted(results, key=lambda s: (s.workload, s.window, args.strategies.index(s.strategy)))
                if any(s.facts.total.values()) and s.strategy != "none"
            ]
        )
        report.report_cpu_per_strategy(run, cpu)
        if lost:
            print(f"({lost} compaction events named a session no replay saw.)\n")
        if not args.no_cpu:
            await cpu_phase(args, tmp, upstream, every)
    finally:
        await upstream.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"Total run time {time.perf_counter() - started:.0f} s.")
    return 0


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="locomo10.json (default: ../shared/data/)")
    parser.add_argument("--quick", action="store_true", help="2 conversations, 12 agent tasks, fewer CPU samples")
    parser.add_argument("--conversations", type=int, default=None, help="LoCoMo: the first N (default: all 10)")
    parser.add_argument("--agent-tasks", type=int, default=None, help="agent session: user requests (80; quick 12)")
    parser.add_argument("--windows", nargs="+", default=list(WINDOWS), choices=list(WINDOWS))
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--cache-discount", type=float, default=0.1, help="cached tokens' price / full price (0.1)")
    parser.add_argument("--memory", choices=("default", "off"), default="default", help="off: [memory] enabled = false")
    parser.add_argument("--identity", action="store_true", help="LoCoMo: X-Ctx-User and X-Ctx-Scope per conversation")
    parser.add_argument("--no-cpu", action="store_true", help="skip the CPU-vs-history profile")
    parser.add_argument("--cpu-only", action="store_true", help="only the CPU-vs-history profile, no replays")
    parser.add_argument("--cpu-samples", type=int, default=None, help="measured requests per size (100; quick 20)")
    parser.add_argument(
        "--cpu-sizes", type=int, nargs="+", default=None, help="history sizes (100 3000; quick 100 1000)"
    )
    parser.add_argument("--stride", type=int, default=3, help="catch-up stride in user messages (default 3 = B)")
    parser.add_argument("--quiet-wait", type=float, default=None, help="max s to wait for a quiet machine (5; quick 0)")
    args = parser.parse_args(argv)
    if not 0 <= args.cache_discount <= 1:
        parser.error("--cache-discount must be between 0 and 1")
    args.strategies = [s for s in STRATEGIES if s in args.strategies]
    args.windows = sorted(args.windows, key=WINDOWS.__getitem__)
    defaults = {
        "quiet_wait": (0.0, 5.0),
        "conversations": (2, 10),
        "agent_tasks": (12, 80),
        "cpu_samples": (20, 100),
        "cpu_sizes": ([100, 1000], [100, 3000]),
    }
    for name, (quick, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    every = _locomo.load(args.data)  # exits 2 with one line when the data is absent or unreadable
    return asyncio.run(main_async(args, every))


if __name__ == "__main__":
    raise SystemExit(main())

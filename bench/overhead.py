"""What ctxproxy adds to latency and throughput, against a direct call and a bare forwarder.

    .venv/bin/python bench/overhead.py            # full run, 2-3 minutes on 2 cores
    .venv/bin/python bench/overhead.py --quick    # about 30 seconds

The same requests go (1) straight to a local upstream, (2) through a bare aiohttp forwarder
(bench/_servers.py: the floor for a Python proxy) and (3) through ctxproxy (``python -m ctxproxy
serve``, log_level "warning"), plus (4) ``ctx+log``, a second ctxproxy with the per-request info
log on (to /dev/null), to show what the request log costs. Every server runs in its own process
on a free loopback port; the load generator is this process (aiohttp client, pooled connections).

Per workload:
* c=1: warm-up, then sequential requests, interleaved across targets (request i goes to every
  target before request i+1), so drift hits every target alike. Latency = until the whole
  answer (or the whole stream) is read; TTFB = until the first body bytes of a stream.
* c=50: every target warmed up at full concurrency, then N requests per target by 50 workers,
  in ``--rounds`` rounds that alternate the targets; rps = best round (other processes on the
  machine can only slow a round down). Also the CPU time each server process burnt per request
  (/proc/PID/stat, all threads, including the time ctxproxy needs after the last answer to
  finish its background session writes), and how much of the machine *other* processes used
  meanwhile: this box is shared, and a busy neighbour shows up there.

Workload variants: ``same`` resends one identical body (ctxproxy's per-message token cache is
warm after the first request, as when a client resends a conversation); ``uniq`` gives every
request a new last user message of the same size (prefix cached, last message new: the
realistic chat case). All targets get exactly the same bodies.

What metrics cost (``--metrics``): the in-process cost of recording one request's metrics
(bench/_metrics_cost.py: ``Metrics.request_done`` and the store wrapper, with metrics on vs off;
aim < 0.05 ms), and a ``ctx-nometrics`` target, ctxproxy with ``[server] metrics = false``, next to
ctxproxy in the variants table. ``--metrics-only`` prints the in-process figures alone (seconds).

Options for finding where the time goes (not for the headline numbers):
* ``--proxy-src DIR`` runs ctxproxy from DIR/ctxproxy, e.g. a ``git archive HEAD ctxproxy`` snapshot,
  when the work tree is being edited; ``--base-src DIR`` adds ``ctx-base``, ctxproxy run from DIR
  (e.g. a worktree of the code before a change), so before and after run side by side, alternating;
* ``--diagnose`` adds ``ctx-nostore``: ctxproxy with its session write patched out in-process
  (bench/_ctxproxy_diag.py);
* ``--profile DIR`` samples every proxy with py-spy (``pip install py-spy`` into the venv) in
  round 1 of its c=50 phases and prints CPU microseconds per request by function.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import _metrics_cost as metrics_cost
import aiohttp
from _config import proxy_toml
from _procs import CLK_TCK, Server, free_ports, start, stop, wait_ready

# A load generator that starts and samples its own processes: the few blocking subprocess and
# file calls inside coroutines run between measurements, never during one.
# ruff: noqa: ASYNC220, ASYNC240

ROOT = Path(__file__).resolve().parent.parent
SERVERS = Path(__file__).resolve().parent / "_servers.py"
DIAG = Path(__file__).resolve().parent / "_ctxproxy_diag.py"
MODEL = "gpt-4o-mini"
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench-not-a-key"}
DONE = b"data: [DONE]\n\n"
# Issue 26's relay aims per body: (ctx added p50 / forwarder added p50 at most, % of its rps at least).
RELAY_AIMS = {"A": (1.3, 90.0), "B": (1.5, 80.0)}


# --- bodies -----------------------------------------------------------------------------------


def _vocabulary() -> list[str]:
    """Words from stdlib source text (mostly English), so tokenizing costs about what prose costs."""
    words: list[str] = []
    for module in ("argparse", "textwrap", "asyncio/events", "logging/__init__", "email/message"):
        path = Path(os.__file__).parent / f"{module}.py"
        if path.exists():
            words += re.findall(r"[a-z]{2,12}", path.read_text(encoding="utf-8", errors="replace"))
    return words or ["lorem", "ipsum", "dolor", "sit", "amet"]


WORDS = _vocabulary()


def _text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    i = rng.randrange(len(WORDS))
    while size < chars:
        word = WORDS[i % len(WORDS)]
        i += 1 + (i % 3)  # walk the vocabulary; a different start gives different text
        if size and size % 9 == 0:
            word += "."
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


@dataclass(frozen=True)
class Body:
    """A chat body as prefix + last user message + suffix, so a unique last message is cheap."""

    name: str
    stream: bool
    prefix: bytes
    suffix: bytes
    last_chars: int
    fixed_last: bytes

    def build(self, uid: int | None) -> bytes:
        if uid is None:
            return self.prefix + self.fixed_last + self.suffix
        rng = random.Random(uid)
        text = f"(request {uid}) " + _text(rng, self.last_chars)
        last = json.dumps({"role": "user", "content": text[: self.last_chars]}, separators=(",", ":")).encode()
        return self.prefix + last + self.suffix


def make_body(name: str, messages: int, chars: int, stream: bool) -> Body:
    rng = random.Random(f"{name}-{messages}-{chars}")  # same conversation for stream and non-stream
    msgs = [{"role": "system", "content": "You are a helpful assistant. " + _text(rng, chars - 29)}]
    for i in range(1, messages - 1):
        msgs.append({"role": "user" if i % 2 else "assistant", "content": _text(rng, chars)})

    def dumps(obj: object) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    head = b'{"model":"%s","stream":%s,"messages":[' % (MODEL.encode(), b"true" if stream else b"false")
    prefix = head + b",".join(dumps(m) for m in msgs) + b","
    last = dumps({"role": "user", "content": _text(rng, chars)})
    return Body(name, stream, prefix, b'],"temperature":0.2}', chars, last)


# --- processes --------------------------------------------------------------------------------


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy (all cores, all processes) since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


class Load:
    """How much of the machine *other* processes used over an interval (others may run tests here)."""

    def __init__(self, servers: list[Server]) -> None:
        self.servers = servers
        self.t0 = time.perf_counter()
        self.busy0 = machine_busy()
        self.own0 = self._own()

    def _own(self) -> float:
        return sum(s.cpu_seconds() for s in self.servers if s.proc.poll() is None) + time.process_time()

    def foreign_share(self) -> float:
        wall = time.perf_counter() - self.t0
        foreign = (machine_busy() - self.busy0) - (self._own() - self.own0)
        return max(0.0, foreign / (wall * CORES)) if wall > 0 else 0.0


CORES = len(os.sched_getaffinity(0))


async def wait_quiet(servers: list[Server], limit: float, threshold: float = 0.10) -> float:
    """Wait (up to ``limit`` s) for a second in which other processes use < ``threshold`` of the machine."""
    deadline = time.perf_counter() + limit
    while True:
        load = Load(servers)
        await asyncio.sleep(1.0)
        share = load.foreign_share()
        if share < threshold or time.perf_counter() >= deadline:
            return share
        print(f"  ... machine busy with other work ({100 * share:.0f} %), waiting", file=sys.stderr, flush=True)


def code_fingerprint(src: Path) -> str:
    """Short hash of the proxy package being measured (other people edit the tree meanwhile)."""
    digest = hashlib.sha256()
    for path in sorted((src / "ctxproxy").rglob("*.py")):
        digest.update(str(path.relative_to(src)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def git_describe() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "ctxproxy"], cwd=ROOT, capture_output=True, text=True
        )
        return head.strip() + (" + uncommitted changes in ctxproxy/" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def ctxproxy_config(tmp: Path, name: str, upstream_port: int, log_level: str) -> Path:
    directory = tmp / f"config-{name}"
    (directory / "tenants").mkdir(parents=True)
    extra = f"""
        [defaults.upstream]
        base_url = "http://127.0.0.1:{upstream_port}/v1"
        connect_timeout = 10
        read_timeout = 600
        """
    metrics = name != "ctx-nometrics"
    (directory / "proxy.toml").write_text(proxy_toml(tmp / f"store-{name}", log_level, extra, metrics))
    shutil.copy(ROOT / "config" / "tenants" / "default.toml", directory / "tenants" / "default.toml")
    return directory


# --- load -------------------------------------------------------------------------------------


class BenchError(Exception):
    pass


async def send(session: aiohttp.ClientSession, url: str, body: bytes, stream: bool) -> tuple[float, float | None]:
    """(latency, time to first body byte) in seconds; raises on any answer but the expected one."""
    t0 = time.perf_counter()
    async with session.post(url, data=body, headers=HEADERS) as r:
        if stream:
            first = None
            tail = b""
            async for chunk in r.content.iter_any():
                if first is None:
                    first = time.perf_counter()
                tail = (tail + chunk)[-len(DONE) :]
            end = time.perf_counter()
            if r.status != 200 or tail != DONE or first is None:
                raise BenchError(f"{url}: status {r.status}, stream ended with {tail!r}")
            return end - t0, first - t0
        data = await r.read()
        end = time.perf_counter()
        if r.status != 200 or b'"chat.completion"' not in data:
            raise BenchError(f"{url}: status {r.status}: {data[:300]!r}")
        return end - t0, None


@dataclass
class C1:
    latency: list[float] = field(default_factory=list)
    ttfb: list[float] = field(default_factory=list)


@dataclass
class C50:
    """One target's concurrent phase, summed over its rounds."""

    rounds: list[tuple[int, float]] = field(default_factory=list)  # (requests, seconds) per round
    server_cpu: float = 0.0  # the target's own process (0 for direct)
    upstream_cpu: float = 0.0
    client_cpu: float = 0.0
    drain: float = 0.0  # longest wait, after a round's last answer, until the target went idle

    @property
    def requests(self) -> int:
        return sum(n for n, _ in self.rounds)

    @property
    def rps(self) -> float:
        """Best round: other processes on the machine can only make a round slower."""
        return max(n / seconds for n, seconds in self.rounds)

    @property
    def rps_mean(self) -> float:
        return self.requests / sum(seconds for _, seconds in self.rounds)


class Uid:
    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


async def run_c1(
    session: aiohttp.ClientSession, targets: dict[str, str], body: Body, unique: bool, n: int, warmup: int, uid: Uid
) -> dict[str, C1]:
    out = {name: C1() for name in targets}
    for i in range(warmup + n):
        for name, url in targets.items():
            data = body.build(uid.next() if unique else None)
            latency, ttfb = await send(session, url, data, body.stream)
            if i >= warmup:
                out[name].latency.append(latency)
                if ttfb is not None:
                    out[name].ttfb.append(ttfb)
    return out


async def burst(session: aiohttp.ClientSession, url: str, body: Body, unique: bool, n: int, c: int, uid: Uid) -> None:
    remaining = n

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await send(session, url, body.build(uid.next() if unique else None), body.stream)

    await asyncio.gather(*(worker() for _ in range(min(c, n))))


async def wait_idle(server: Server | None, limit: float = 15.0) -> float:
    """Seconds until ``server`` burns no CPU for 100 ms (its background work is done)."""
    if server is None:
        return 0.0
    started = time.perf_counter()
    last = server.cpu_seconds()
    quiet = 0
    while quiet < 2 and time.perf_counter() - started < limit:
        await asyncio.sleep(0.05)
        now = server.cpu_seconds()
        quiet = quiet + 1 if now == last else 0
        last = now
    return max(0.0, time.perf_counter() - started - 0.1)


async def run_c50(
    session: aiohttp.ClientSession,
    server: Server | None,
    upstream: Server,
    url: str,
    body: Body,
    unique: bool,
    n: int,
    c: int,
    uid: Uid,
    into: C50,
    profile_to: Path | None = None,
) -> None:
    """One round: ``n`` requests by ``c`` workers, added to ``into``."""
    spy = None
    if profile_to is not None and server is not None:
        spy = subprocess.Popen(
            [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(server.proc.pid),
             "--rate", str(PROFILE_RATE), "--format", "raw", "--output", str(profile_to), "--nonblocking", "--threads"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        await asyncio.sleep(1.0)  # let it attach
    cpu0 = server.cpu_seconds() if server else 0.0
    up0, client0 = upstream.cpu_seconds(), time.process_time()
    t0 = time.perf_counter()
    await burst(session, url, body, unique, n, c, uid)
    seconds = time.perf_counter() - t0
    into.drain = max(into.drain, await wait_idle(server))
    into.rounds.append((n, seconds))
    into.server_cpu += (server.cpu_seconds() - cpu0) if server else 0.0
    into.upstream_cpu += upstream.cpu_seconds() - up0
    into.client_cpu += time.process_time() - client0
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)


# --- reporting --------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


def ms(seconds: float, signed: bool = False) -> str:
    return f"{seconds * 1000:+.2f}" if signed else f"{seconds * 1000:.2f}"


PROFILE_RATE = 500  # py-spy samples per second


def summarize_profile(path: Path, requests: int, top: int = 22) -> str:
    """Per-function CPU per request from a py-spy raw (collapsed) file: samples / rate / requests."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    by_thread: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = stack.split(";")
        thread, frames = frames[0], frames[1:]
        by_thread[re.sub(r"^thread \(\d+\): ", "", thread).rstrip("_0123456789") or thread] += n
        total += n
        names = [re.sub(r":\d+\)$", ")", f) for f in frames]
        if names:
            own[names[-1]] += n
        for name in set(names):
            incl[name] += n
    if not total:
        return f"(no samples in {path})"

    def us(n: int) -> str:
        return f"{1e6 * n / PROFILE_RATE / requests:7.1f} µs"

    lines = [f"{path.stem}: {total} samples at {PROFILE_RATE}/s over {requests} requests = {us(total)} of CPU per "
             "request (non-idle samples, all threads)", "", "by thread:"]  # fmt: skip
    lines += [f"  {us(n)}  {t}" for t, n in by_thread.most_common(4)]
    lines += ["", "self (the function itself, including C code it calls):"]
    lines += [f"  {us(n)}  {f}" for f, n in own.most_common(top)]
    shown = [
        (f, n)
        for f, n in incl.most_common()
        if ("ctxproxy/" in f and "__main__" not in f and "cli.py" not in f and "runner.py" not in f)
        or re.search(r"^(forward|upstream_chat) \(|\((diskcache|tiktoken)/", f)
    ]
    lines += ["", "inclusive (ctxproxy/ functions and what they call):"]
    lines += [f"  {us(n)}  {f}" for f, n in shown[:top]]
    return "\n".join(lines)


WORKLOAD_LABELS = {"same": "same body (token cache warm)", "uniq": "unique last user msg (prefix cached)"}


async def main_async(args: argparse.Namespace) -> int:
    command = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.executable, ROOT), *sys.argv])
    print(f"# ctxproxy overhead benchmark\n\ncommand: `{command}` (cwd {ROOT})\n")
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), aiohttp {aiohttp.__version__}, "
        f"{os.cpu_count()} cores (affinity {len(os.sched_getaffinity(0))}), {platform.system()} {platform.release()}"
    )
    print(
        "Load generator, upstream, bare forwarder and ctxproxy processes all share these cores; "
        'asyncio default event loop everywhere. ctxproxy runs with log_level="warning": its per-request '
        "info log line is disabled for the measurement; the `ctx+log` target is a second ctxproxy with "
        'log_level="info" (JSON lines to /dev/null) to show the logging cost. ctxproxy keeps its '
        "background session write (diskcache) per chat request.\n"
    )

    sizes = {"A": (50, args.a_chars), "B": (200, args.b_chars)}
    bodies = {(b, s): make_body(b, sizes[b][0], sizes[b][1], s) for b in "AB" for s in (False, True)}
    workloads = [
        (b, s, v)
        for b in "AB"
        for v in ("same", "uniq")
        for s in (False, True)
        if not args.only or f"{b}-{'sse' if s else 'json'}-{v}" in args.only
    ]
    for b in "AB":
        print(f"body {b}: {sizes[b][0]} messages (system + alternating user/assistant, last one user), "
              f"{len(bodies[(b, False)].build(None)) / 1024:.1f} KB of JSON")  # fmt: skip
    c1_n = {"A": args.c1_a, "B": args.c1_b}
    c50_n = {"A": args.c50_a, "B": args.c50_b}
    print(
        f"c=1: {c1_n['A']} (A) / {c1_n['B']} (B) sequential requests per target after {args.warmup} warm-up; "
        f"c={args.concurrency}: {c50_n['A']} (A) / {c50_n['B']} (B) requests per target after "
        f"{args.c50_warmup} warm-up, in {args.rounds} rounds that alternate the targets; rps = best round.\n"
    )

    proxy_src = Path(args.proxy_src).resolve() if args.proxy_src else ROOT
    where = "this work tree, " + git_describe() if proxy_src == ROOT else str(proxy_src)
    print(f"ctxproxy code: {where} (ctxproxy/*.py sha256 {code_fingerprint(proxy_src)})\n")
    tmp = Path(tempfile.mkdtemp(prefix="ctxproxy-bench-"))
    up_port, fwd_port, ctx_port, log_port, diag_port, nometrics_port, base_port = free_ports(7)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXPROXY_"))}
    servers: list[Server] = []
    started = time.perf_counter()
    try:
        upstream = start("upstream", [str(SERVERS), "upstream", "--port", str(up_port)], up_port, tmp)
        servers.append(upstream)
        forwarder = start(
            "forwarder",
            [str(SERVERS), "forward", "--port", str(fwd_port), "--upstream", f"http://127.0.0.1:{up_port}"],
            fwd_port,
            tmp,
        )
        servers.append(forwarder)
        proxies: dict[str, tuple[str, int, list[str]]] = {"ctxproxy": ("warning", ctx_port, [])}
        if not args.no_log_variant:
            proxies["ctx+log"] = ("info", log_port, [])
        if args.diagnose:
            proxies["ctx-nostore"] = ("warning", diag_port, [str(DIAG), "nostore"])
        if args.metrics:
            proxies["ctx-nometrics"] = ("warning", nometrics_port, [])
        if args.base_src:
            proxies["ctx-base"] = ("warning", base_port, [])
        proxy_servers: dict[str, Server] = {}
        for name, (level, port, runner) in proxies.items():
            config = ctxproxy_config(tmp, name, up_port, level)
            argv = [*(runner or ["-m", "ctxproxy"]), "serve", "--config", str(config), "--port", str(port)]
            src = Path(args.base_src).resolve() if name == "ctx-base" else proxy_src
            penv = {**env, "PYTHONPATH": str(src)} if runner else env
            server = start(name, argv, port, tmp, penv, cwd=src)
            servers.append(server)
            proxy_servers[name] = server

        connector = aiohttp.TCPConnector(limit=args.concurrency * 2 + 10, limit_per_host=0)
        timeout = aiohttp.ClientTimeout(total=120)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            await wait_ready(session, servers)
            targets = {"direct": upstream.url, "forwarder": forwarder.url}
            targets |= {name: s.url for name, s in proxy_servers.items()}
            target_server: dict[str, Server | None] = {"direct": None, "forwarder": forwarder, **proxy_servers}
            chat = {name: url + "/v1/chat/completions" for name, url in targets.items()}

            uid = Uid()
            results = []
            foreign: dict[str, tuple[float, float]] = {}
            profiled: dict[Path, int] = {}
            for b, stream, variant in workloads:
                body = bodies[(b, stream)]
                unique = variant == "uniq"
                key = f"{b}-{'sse' if stream else 'json'}-{variant}"
                t_w = time.perf_counter()
                if args.quiet_wait > 0:
                    await wait_quiet(servers, args.quiet_wait)
                load = Load(servers)
                c1 = await run_c1(session, chat, body, unique, c1_n[b], args.warmup, uid)
                foreign_c1 = load.foreign_share()
                load = Load(servers)
                c50 = {name: C50() for name in targets}
                for name in targets:  # warm every pool to full concurrency first
                    await burst(session, chat[name], body, unique, args.c50_warmup, args.concurrency, uid)
                    await wait_idle(target_server[name])
                per_round = max(1, c50_n[b] // args.rounds)
                for r in range(args.rounds):  # rounds interleave the targets, so a burst of other load hits all
                    for name in targets:
                        profile_to = None
                        if args.profile and target_server[name] is not None and r == 0:
                            Path(args.profile).mkdir(parents=True, exist_ok=True)
                            profile_to = Path(args.profile) / f"{key}--{name}.txt"
                            profiled[profile_to] = per_round
                        await run_c50(
                            session, target_server[name], upstream, chat[name], body, unique, per_round,
                            args.concurrency, uid, c50[name], profile_to,
                        )  # fmt: skip
                foreign[key] = (foreign_c1, load.foreign_share())
                results.append((key, b, stream, variant, c1, c50))
                print(f"  ... {key} done in {time.perf_counter() - t_w:.1f} s", file=sys.stderr, flush=True)
    finally:
        stop(servers)
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.perf_counter() - started

    # -- the main table
    print(f"## Latency at c=1 and throughput at c={args.concurrency}\n")
    print(f"ms; p99 is the nearest-rank p99 of {args.c1_a} (A) / {args.c1_b} (B) samples. "
          "*added* = target's percentile minus direct's. ratio = ctx added p50 / forwarder added p50 "
          "(issue 26's aim: <= 1.3 for A, <= 1.5 for B). ctx % fwd = ctxproxy rps / forwarder rps "
          "(aim: >= 90 % for A, >= 80 % for B).\n")  # fmt: skip
    print("| workload | stream | variant | direct p50 / p99 | fwd added p50 / p99 | ctx added p50 / p99 | ratio "
          "| rps direct / fwd / ctx | ctx % fwd |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for _key, b, stream, variant, c1, c50 in results:
        d50, d99 = pct(c1["direct"].latency, 50), pct(c1["direct"].latency, 99)
        f50, f99 = pct(c1["forwarder"].latency, 50), pct(c1["forwarder"].latency, 99)
        x50, x99 = pct(c1["ctxproxy"].latency, 50), pct(c1["ctxproxy"].latency, 99)
        fa, xa = f50 - d50, x50 - d50
        ratio = f"{xa / fa:.2f}" if fa > 0 else "n/a"
        most_added, least_share = RELAY_AIMS[b]
        ratio += "" if fa > 0 and xa / fa <= most_added else " ✗"
        share = c50["ctxproxy"].rps / c50["forwarder"].rps * 100
        print(
            f"| {b} {len(bodies[(b, stream)].build(None)) // 1024} KB | {'SSE' if stream else 'JSON'} "
            f"| {WORKLOAD_LABELS[variant]} | {ms(d50)} / {ms(d99)} | {ms(fa, True)} / {ms(f99 - d99, True)} "
            f"| {ms(xa, True)} / {ms(x99 - d99, True)} | {ratio} "
            f"| {c50['direct'].rps:.0f} / {c50['forwarder'].rps:.0f} / {c50['ctxproxy'].rps:.0f} "
            f"| {share:.0f} %{'' if share >= least_share else ' ✗'} |"
        )

    # -- streaming time to first byte
    print("\n## Streaming: time to first body byte at c=1, p50 (ms)\n")
    names = list(results[0][4]) if results else []
    print("| workload | variant | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for _key, b, stream, variant, c1, _ in results:
        if stream:
            print(f"| {b} SSE | {variant} | " + " | ".join(ms(pct(c1[n].ttfb, 50)) for n in names) + " |")

    # -- CPU per request
    print(f"\n## CPU per request at c={args.concurrency} (ms of user+sys CPU, all threads)\n")
    print("The target's own process; ctx includes its background session writes (drain = time after the "
          "last answer until it went idle). On 2 shared cores rps is bounded by total CPU per request.\n")  # fmt: skip
    proxies_present = [n for n in names if n not in ("direct",)]
    print("| workload | variant | upstream | client | " + " | ".join(proxies_present) + " | ctx drain s "
          "| other load c=1 / c=50 |")  # fmt: skip
    print("|---|---|---|---|" + "---|" * (len(proxies_present) + 2))
    for key, b, stream, variant, _, c50 in results:
        d = c50["direct"]
        cells = " | ".join(f"{1000 * c50[n].server_cpu / c50[n].requests:.2f}" for n in proxies_present)
        print(
            f"| {b} {'SSE' if stream else 'JSON'} | {variant} | {1000 * d.upstream_cpu / d.requests:.2f} "
            f"| {1000 * d.client_cpu / d.requests:.2f} | {cells} | {c50['ctxproxy'].drain:.2f} "
            f"| {100 * foreign[key][0]:.0f} % / {100 * foreign[key][1]:.0f} % |"
        )
    worst = max((max(v) for v in foreign.values()), default=0.0)
    print(
        f"\n*other load* = share of the machine's {CORES} cores used by processes outside this benchmark "
        "while the phase ran. "
        + (
            f"WARNING: up to {100 * worst:.0f} % — rps and p99 of this run are disturbed; CPU ms/req "
            "is the more robust comparison."
            if worst > 0.10
            else "It stayed low: the machine was quiet."
        )
    )

    # -- ctxproxy variants: the info log (ctx+log) and, with --diagnose, no session write
    variants = [n for n in names if n.startswith("ctx") and n != "ctxproxy"]
    if variants:
        about = {
            "ctx+log": "ctx+log = log_level info (one JSON line per request, to /dev/null)",
            "ctx-nostore": "ctx-nostore = session write patched out (diagnostic only)",
            "ctx-nometrics": "ctx-nometrics = [server] metrics = false",
            "ctx-base": f"ctx-base = ctxproxy run from {args.base_src}",
        }
        print("\n## ctxproxy variants: " + "; ".join(about[v] for v in variants) + "\n")
        cols = ["ctxproxy", *variants]
        print("| workload | variant | p50 c=1 (ms) " + " / ".join(cols) + " | rps " + " / ".join(cols)
              + " | CPU ms/req " + " / ".join(cols) + " |")  # fmt: skip
        print("|---|---|---|---|---|")
        for _key, b, stream, variant, c1, c50 in results:
            print(
                f"| {b} {'SSE' if stream else 'JSON'} | {variant} | "
                + " / ".join(ms(pct(c1[n].latency, 50)) for n in cols)
                + " | "
                + " / ".join(f"{c50[n].rps:.0f}" for n in cols)
                + " | "
                + " / ".join(f"{1000 * c50[n].server_cpu / c50[n].requests:.2f}" for n in cols)
                + " |"
            )

    print(f"\ntotal run time {elapsed:.0f} s")
    if args.json:
        dump = [
            {
                "workload": key,
                "c1": {
                    n: {"p50": pct(r.latency, 50), "p99": pct(r.latency, 99), "n": len(r.latency),
                        "ttfb_p50": pct(r.ttfb, 50) if r.ttfb else None}
                    for n, r in c1.items()
                },
                "c50": {n: {**vars(r), "rps": r.rps, "rps_mean": r.rps_mean} for n, r in c50.items()},
            }
            for key, b, stream, variant, c1, c50 in results
        ]  # fmt: skip
        Path(args.json).write_text(json.dumps(dump, indent=1))
    if args.profile:
        print("\n## py-spy profiles of the proxies during round 1 of their c=50 phases\n")
        print("(the rps and CPU numbers of a --profile run are taken under the sampler: use them for nothing else)\n")
        for path, requests in profiled.items():
            print("```\n" + summarize_profile(path, requests) + "\n```\n")
    return 0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="small counts, about 30 s")
    p.add_argument("--c1-a", type=int, help="sequential requests per target, body A (300; quick 40)")
    p.add_argument("--c1-b", type=int, help="sequential requests per target, body B (100; quick 15)")
    p.add_argument("--c50-a", type=int, help="concurrent-phase requests per target, body A (2000; quick 250)")
    p.add_argument("--c50-b", type=int, help="concurrent-phase requests per target, body B (500; quick 60)")
    p.add_argument("--warmup", type=int, help="c=1 warm-up requests per target (30; quick 8)")
    p.add_argument("--c50-warmup", type=int, help="c=50 warm-up requests per target (100; quick 25)")
    p.add_argument("--concurrency", type=int, default=50)
    p.add_argument(
        "--rounds", type=int, default=2, help="split each c=50 phase into R interleaved rounds; rps = best round"
    )
    p.add_argument("--a-chars", type=int, default=380, help="characters per message in body A (~20 KB)")
    p.add_argument("--b-chars", type=int, default=2480, help="characters per message in body B (~500 KB)")
    p.add_argument("--only", nargs="*", help="workloads to run, e.g. A-json-same B-sse-uniq")
    p.add_argument(
        "--quiet-wait",
        type=float,
        help="before each workload wait up to S s for other load < 10 %% (20; quick 5; 0: no)",
    )
    p.add_argument("--no-log-variant", action="store_true", help="skip the ctxproxy with info logging")
    p.add_argument(
        "--diagnose",
        action="store_true",
        help="add a `ctx-nostore` target: ctxproxy with its session write patched out in-process (cost attribution)",
    )
    p.add_argument(
        "--metrics",
        action="store_true",
        help="add a `ctx-nometrics` target ([server] metrics = false) and the in-process cost of metrics",
    )
    p.add_argument("--metrics-only", action="store_true", help="print the in-process cost of metrics and stop")
    p.add_argument("--profile", metavar="DIR", help="py-spy ctxproxy during its c=50 phases, raw stacks to DIR")
    p.add_argument("--json", metavar="FILE", help="also write raw results as JSON")
    p.add_argument(
        "--proxy-src",
        metavar="DIR",
        help="run ctxproxy from DIR/proxy instead of this tree (e.g. a `git archive HEAD proxy` snapshot)",
    )
    p.add_argument("--base-src", metavar="DIR", help="add `ctx-base`: ctxproxy run from DIR, beside this one")
    args = p.parse_args()
    defaults = (
        dict(c1_a=40, c1_b=15, c50_a=250, c50_b=60, warmup=8, c50_warmup=25, quiet_wait=5.0)
        if args.quick
        else dict(c1_a=300, c1_b=100, c50_a=2000, c50_b=500, warmup=30, c50_warmup=100, quiet_wait=20.0)
    )
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


if __name__ == "__main__":
    arguments = parse_args()
    if arguments.metrics_only:
        print(metrics_cost.report())
        sys.exit(0)
    status = asyncio.run(main_async(arguments))
    if arguments.metrics:  # in-process, after the load: nothing else runs in this process meanwhile
        print("\n## What metrics cost per request, in-process\n")
        print(metrics_cost.report())
    sys.exit(status)

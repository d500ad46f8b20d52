"""The proxy's CPU per request as a conversation's history grows, for bench/compaction.py: one
strategy at a time, each in a fresh ``ctxproxy serve`` at the 8k window, on synthetic
conversations (the LoCoMo conversations back to back), the client resending the whole history
plus one new user message each time."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
from _bench_client import Answer, post
from _compaction_servers import Proxy, Upstream
from _prompt_cost import PRIMING, Shape, Units
from _workloads import Conversation

CLK_TCK = os.sysconf("SC_CLK_TCK")
CORES = len(os.sched_getaffinity(0))


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def aim(ok: bool) -> str:
    return "met" if ok else "**missed**"


@dataclass
class CpuPoint:
    size: int  # target history length
    requests: int
    mean_messages: float
    cpu: float  # seconds, all requests
    compactions: int
    mean_forwarded_messages: float
    mean_forwarded_tokens: float
    sessions: int
    median: float  # seconds, proxy CPU from sending one request to its answer, median over the requests
    foreign_share: float  # of the machine, used by other processes during the measurement
    # seconds, the mean compacting request's proxy CPU: all threads, and the main (event loop) thread's
    compacting: tuple[float, float] | None = None

    @property
    def ms_per_request(self) -> float:
        return 1000 * self.cpu / self.requests


async def _send(
    http: aiohttp.ClientSession, proxy: Proxy, shape: Shape, conv: Conversation, n: int, tag: str | None
) -> Answer:
    answer = await post(http, proxy.url, shape, conv.body(n), tag, conv.headers)
    if not answer.ok:
        raise SystemExit(f"proxy ({proxy.strategy}): {answer.error}\n{proxy.errlog.read_text()[-3000:]}")
    return answer


async def _catch_up(
    http: aiohttp.ClientSession, proxy: Proxy, shape: Shape, conv: Conversation, points: Sequence[int], stride: int
) -> None:
    """Send the history through every ``stride``-th of ``points``, the last few through every one."""
    tail = 3 * stride
    chosen = list(points) if len(points) <= tail else [*points[:-tail:stride], *points[-tail:]]
    for n in chosen:
        await _send(http, proxy, shape, conv, n, None)


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (all cores, all processes) since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


async def wait_quiet(proxy: Proxy, limit: float, threshold: float = 0.15) -> None:
    """Wait (up to ``limit`` s) for half a second in which other processes use < ``threshold`` of
    the machine: other people run test suites on this box."""
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        busy0, own0, cpu0, t0 = machine_busy(), time.process_time(), proxy.cpu_seconds(), time.perf_counter()
        await asyncio.sleep(0.5)
        own = time.process_time() - own0 + proxy.cpu_seconds() - cpu0
        if (machine_busy() - busy0 - own) / ((time.perf_counter() - t0) * CORES) < threshold:
            return


@dataclass
class Batch:
    cpu: float = 0.0  # proxy CPU seconds over the batch, the flush after it included
    each: list[float] = field(default_factory=list)  # proxy CPU seconds from sending a request to its answer
    compacting: list[tuple[float, float]] = field(default_factory=list)  # (all threads, main thread), compacting ones
    compactions: int = 0
    bodies: list[bytes] = field(default_factory=list)
    wall: float = 0.0
    foreign: float = 0.0  # CPU seconds of other processes (not the proxy, not this one) meanwhile


async def _measure(
    http: aiohttp.ClientSession,
    proxy: Proxy,
    upstream: Upstream,
    shape: Shape,
    conv: Conversation,
    batch: Sequence[int],
    label: str,
    into: Batch,
    quiet_wait: float,
) -> None:
    """Add the proxy's CPU over ``batch`` (one request each) to ``into``."""
    await asyncio.sleep(0.6)  # the session recorder flushes every 0.25 s: let the catch-up's flush land first
    await wait_quiet(proxy, quiet_wait)
    busy0, own0, t0 = machine_busy(), time.process_time(), time.perf_counter()
    cpu0 = last = proxy.cpu_seconds()
    main = proxy.main_thread_seconds()
    for i, n in enumerate(batch):
        tag = f"{label}:{i}"
        answer = await _send(http, proxy, shape, conv, n, tag)
        now, main_now = proxy.cpu_seconds(), proxy.main_thread_seconds()
        into.each.append(now - last)
        if answer.compacted:
            into.compacting.append((now - last, main_now - main))
        last, main = now, main_now
        into.compactions += answer.compacted
        into.bodies.append(upstream.bodies.pop(tag))
    await asyncio.sleep(0.6)  # ... and count this batch's own flush
    cpu = proxy.cpu_seconds() - cpu0
    into.cpu += cpu
    into.wall += time.perf_counter() - t0
    into.foreign += max(0.0, machine_busy() - busy0 - cpu - (time.process_time() - own0))


async def cpu_profile(
    http: aiohttp.ClientSession,
    proxy: Proxy,
    upstream: Upstream,
    shape: Shape,
    variants: Sequence[Conversation],
    sizes: Sequence[int],
    samples: int,
    stride: int,
    units: Units,
    quiet_wait: float,
) -> list[CpuPoint]:
    """Grow synthetic conversations through one proxy and measure its CPU per request at each size.

    The smallest size is measured on ``len(variants)`` sessions (the same LoCoMo turns in
    another order, so another session key), ``samples / len(variants)`` requests each, so the
    history stays near that size; the larger sizes on the first session, grown on with every
    ``stride``-th user message (rounds compresses B rounds per request: stride <= B keeps it in its
    steady state), then ``samples`` consecutive requests. Each request is the previous history,
    the LoCoMo answer(s) and a new user message."""
    per_session = -(-samples // len(variants))
    points: list[CpuPoint] = []
    done = [0] * len(variants)  # per session: index into its user messages already sent
    for n, size in enumerate(sizes):
        sessions = range(len(variants)) if n == 0 else range(1)
        take = per_session if n == 0 else samples
        measured = Batch()
        lengths: list[int] = []
        for k in sessions:
            sends = variants[k].points
            first = next(i for i, p in enumerate(sends) if p >= size)
            batch = sends[first : first + take]
            if len(batch) < take:
                raise SystemExit(f"synthetic conversation too short for {take} requests at {size} messages")
            await _catch_up(http, proxy, shape, variants[k], sends[done[k] : first], stride if n else 1)
            label = f"cpu:{proxy.strategy}:{size}:{k}"
            await _measure(http, proxy, upstream, shape, variants[k], batch, label, measured, quiet_wait)
            lengths += batch
            done[k] = first + take
        forwarded = [shape.units(orjson.loads(b))[0] for b in measured.bodies]  # analysed after the CPU readings
        points.append(
            CpuPoint(
                size,
                len(lengths),
                statistics.fmean(lengths),
                measured.cpu,
                measured.compactions,
                statistics.fmean(len(f) for f in forwarded),
                statistics.fmean(sum(u.tokens for u in f) + PRIMING for f in forwarded),
                len(sessions),
                statistics.median(measured.each),
                measured.foreign / (measured.wall * CORES) if measured.wall else 0.0,
                _mean_pair(measured.compacting),
            )
        )
    return points


def _mean_pair(pairs: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    if not pairs:
        return None
    return statistics.fmean(p[0] for p in pairs), statistics.fmean(p[1] for p in pairs)


def ordinal(n: int) -> str:
    return {1: "", 2: "2nd ", 3: "3rd "}.get(n, f"{n}th ")


def report_cpu(
    cpu: dict[str, list[CpuPoint]], synthetic_len: int, samples: int, stride: int, quick: bool, quiet_wait: float
) -> None:
    first = next(iter(cpu.values()))
    sizes = [p.size for p in first]
    small = first[0]
    print("## Proxy CPU per request vs history length\n")
    print(
        f"Synthetic conversations: the 10 LoCoMo conversations back to back ({synthetic_len:,} messages), starting "
        f"with a different one per session. Per strategy one fresh proxy process (log_level warning). At "
        f"~{sizes[0]:,} messages: {small.sessions} session(s), each sent every user message up to ~{sizes[0]:,} "
        f"messages, then {-(-samples // small.sessions)} measured requests (so the history stays near "
        f"{sizes[0]:,}). Then the first session goes on, sent every {ordinal(stride)}user message (rounds compresses "
        f"B = 3 rounds per request, so every strategy arrives in its steady state) up to ~{sizes[-1]:,}, the last few "
        f"every one, then {samples} measured requests. Each request is the whole history through the next user "
        "message: the prefix is known to the proxy; new are the previous LoCoMo answer(s) and the question. "
        "CPU = user + system time of all the proxy's threads (/proc/PID/task/*/schedstat) over the measured "
        "requests, including the session-record flush after them, per request. Cells: **mean ms/request** "
        "(median of the per-request CPU, read from sending a request to its answer: the typical request "
        "without a compaction; mean history messages; mean forwarded messages / tokens; compactions among the "
        "measured requests). The aim is judged on the mean. 'Other load': share of the machine that other "
        f"processes used meanwhile (this box is shared; CPU time is robust to it, but not immune; each batch "
        f"waits up to {quiet_wait:g} s for a quiet half second first).\n"
    )
    if quick:
        print(f"(--quick measures at ~{sizes[0]:,} and ~{sizes[-1]:,} messages; the aim is stated for ~3,000.)\n")
    head = " | ".join(f"~{s:,} msgs" for s in sizes)
    print(f"| strategy | {head} | ratio {sizes[-1]:,} / {sizes[0]:,}: mean (median) | aim ≤ 3 | other load |")
    print("|---|" + "---|" * len(sizes) + "---|---|---|")
    for strategy, points in cpu.items():
        cells = " | ".join(
            f"**{p.ms_per_request:.2f} ms** ({1000 * p.median:.2f} ms; {p.mean_messages:.0f}; "
            f"{p.mean_forwarded_messages:.0f} / {p.mean_forwarded_tokens:,.0f}; {p.compactions})"
            for p in points
        )
        lo, hi = points[0], points[-1]
        ratio = hi.ms_per_request / lo.ms_per_request if lo.ms_per_request else float("inf")
        median_ratio = hi.median / lo.median if lo.median else float("inf")
        load = max(p.foreign_share for p in points)
        print(f"| {strategy} | {cells} | {ratio:.2f} ({median_ratio:.2f}) | {aim(ratio <= 3)} | ≤ {pct(load)} |")
    print()
    split = [
        f"{strategy} ~{p.size:,}: {1000 * p.compacting[0]:.2f} / {1000 * p.compacting[1]:.2f} ms"
        for strategy, points in cpu.items()
        for p in points
        if p.compacting is not None
    ]
    if split:
        print(f"Compacting requests, proxy CPU (mean; all threads / the main thread's): {'; '.join(split)}.\n")

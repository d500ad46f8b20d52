"""Compaction on real long conversations: LoCoMo replayed through every strategy.

    .venv/bin/python bench/compaction.py            # all 10 conversations, ~5 minutes on 2 cores
    .venv/bin/python bench/compaction.py --quick    # 2 conversations, CPU at ~100/~1,000 msgs, < 1 minute

Data: ``--data`` (default ``../shared/data/locomo10.json`` next to the repository; LoCoMo is
CC BY-NC 4.0 and is read at run time, never copied here).

A client that resends its whole history replays each LoCoMo conversation (bench/_locomo.py:
speaker_a is the user, speaker_b the assistant, one request at every user message; the
upstream's answers are ignored, the next LoCoMo turn is the history) through a real ctxproxy
(``python -m ctxproxy serve``, one subprocess per strategy, fresh store) on loopback, with
``summarizer = "extractive"`` and a model window of 8,192 tokens (``default_context_window``;
the model name "locomo-model" matches no built-in window). A local upstream inside this
process records every forwarded body; everything is measured on what was forwarded, counted
with ``ctxproxy.tokens.TokenCounter`` (the proxy's ``X-Ctx-Tokens-After`` is only checked against it).

Reported per strategy:
* forwarded prompt tokens summed over all requests, as a share of the full-history sum;
* the peak forwarded prompt and how many prompts exceed the limit (window − reserve:
  cut_point's reserve_tokens, else the window itself);
* cache friendliness: of the consecutive request pairs of a conversation with no compaction in
  between, the share whose forwarded lists agree (serialised bytes) on everything but the
  previous request's last message; pairs with a compaction in between are counted apart;
* compactions: the proxy's ``compaction`` log events (one summariser call each, plus one for a
  cut_point cut that splits a turn), cross-checked with ``X-Ctx-Compacted: 1``;
* the proxy's CPU per request (all its threads, /proc/PID/task/*/schedstat) with ~100 and ~3,000
  messages of history, on synthetic conversations (LoCoMo conversations back to back): the
  client resends the full history plus one new user message each time.

Memory: each tenant's ``[memory]`` is left to its strategy's defaults (on for rolling_summary,
rounds and cut_point, layered for rounds); ``--memory off`` turns it off (compaction alone), and
``--identity`` names each conversation's user and scope (``X-Ctx-User``, ``X-Ctx-Scope``), so
``rounds`` sends note 002's User and Scope Memory (without an identity there are no such layers).

Other options: ``--conversations N``, ``--strategies ...``, ``--cpu-samples``, ``--cpu-sizes``,
``--stride``, ``--quiet-wait``, ``--memory``, ``--identity`` (see ``--help``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

# A load generator that starts and samples its own processes: the few blocking subprocess and
# file calls inside coroutines run between measurements, never during one.
# ruff: noqa: ASYNC220, ASYNC240

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _locomo  # noqa: E402
from _config import proxy_toml  # noqa: E402

from ctxproxy.config import load_config  # noqa: E402
from ctxproxy.session import message_digest  # noqa: E402
from ctxproxy.tokens import TokenCounter  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10.json"
MODEL = "locomo-model"
WINDOW = 8192
STRATEGIES = ("none", "sliding_window", "rolling_summary", "rounds", "cut_point")
# Note defaults everywhere, except cut_point's token budgets, which assume ~128k windows
# (reserve 16384 > an 8k window): scaled to the 8k window.
OVERRIDES: dict[str, dict[str, Any]] = {"cut_point": {"reserve_tokens": 2048, "keep_recent_tokens": 3000}}
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench-not-a-key"}
TAG = "X-Bench-Req"
SUMMARY_NAME = "context_summary"
SPLIT_TURN_MARK = "### Current turn so far"
CLK_TCK = os.sysconf("SC_CLK_TCK")
CORES = len(os.sched_getaffinity(0))
SMALL_BATCH = 20  # requests per session at the smallest history size (the history grows 2 messages a request)
COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-locomo",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "(ignored)"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 1, "total_tokens": 1},
    }
)


# --- processes ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def reserve_of(strategy: str) -> int:
    return int(OVERRIDES.get(strategy, {}).get("reserve_tokens", 0)) if strategy == "cut_point" else 0


def write_config(
    directory: Path, strategy: str, upstream_port: int, log_level: str = "warning", memory: str = "default"
) -> Path:
    """``memory``: "default" leaves ``[memory]`` to the strategy's defaults; "off" turns it off."""
    (directory / "tenants").mkdir(parents=True)
    (directory / "proxy.toml").write_text(proxy_toml(directory / "store", log_level))
    table = "".join(f"{k} = {v}\n" for k, v in OVERRIDES.get(strategy, {}).items())
    (directory / "tenants" / "default.toml").write_text(
        f"default_context_window = {WINDOW}\n\n"
        f'[upstream]\nbase_url = "http://127.0.0.1:{upstream_port}/v1"\n\n'
        f'[compaction]\nstrategy = "{strategy}"\nsummarizer = "extractive"\nmode = "inline"\n'
        + (f"\n[compaction.{strategy}]\n{table}" if table else "")
        + ("\n[memory]\nenabled = false\n" if memory == "off" else "")
    )
    return directory


@dataclass
class Proxy:
    strategy: str
    url: str
    proc: subprocess.Popen[bytes]
    errlog: Path

    def cpu_seconds(self) -> float:
        """User + system CPU of every thread, nanosecond resolution from schedstat (clock ticks
        from /proc/PID/stat where schedstat is missing)."""
        total = 0
        try:
            for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
                try:
                    total += int((task / "schedstat").read_text().split()[0])
                except (OSError, ValueError, IndexError):
                    continue
            if total:
                return total / 1e9
        except OSError:
            pass
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK


def start_proxy(
    strategy: str, tmp: Path, upstream_port: int, label: str, log_level: str = "warning", memory: str = "default"
) -> Proxy:
    config = write_config(tmp / f"{label}-{strategy}", strategy, upstream_port, log_level, memory)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXPROXY_"))}
    errlog = tmp / f"{label}-{strategy}.log"
    with errlog.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxproxy", "serve", "--config", str(config), "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=err,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return Proxy(strategy, f"http://127.0.0.1:{port}", proc, errlog)


async def wait_ready(http: aiohttp.ClientSession, proxy: Proxy, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proxy.proc.poll() is not None:
            raise SystemExit(f"proxy ({proxy.strategy}) exited {proxy.proc.returncode}:\n{proxy.errlog.read_text()}")
        try:
            async with http.get(proxy.url + "/healthz") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"proxy ({proxy.strategy}) not ready after {timeout:g}s:\n{proxy.errlog.read_text()}")
        await asyncio.sleep(0.05)


def stop(proxy: Proxy) -> None:
    if proxy.proc.poll() is None:
        proxy.proc.send_signal(signal.SIGTERM)
        try:
            proxy.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proxy.proc.kill()
            proxy.proc.wait()


class Upstream:
    """The model: records each forwarded body that carries a bench tag, answers a fixed completion."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.read()
        tag = request.headers.get(TAG)
        if tag is not None:
            self.bodies[tag] = body
        return web.Response(body=COMPLETION, content_type="application/json")

    async def start(self) -> None:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


# --- the client ---------------------------------------------------------------------------------


class Encoded:
    """A conversation's messages pre-serialised, so a request body is a join of byte strings."""

    HEAD = b'{"model":"' + MODEL.encode() + b'","messages":['
    TAIL = b"]}"

    def __init__(self, messages: Sequence[dict[str, Any]]) -> None:
        self.parts = [orjson.dumps(m) for m in messages]

    def body(self, n: int) -> bytes:
        return self.HEAD + b",".join(self.parts[:n]) + self.TAIL


@dataclass
class Answer:
    compacted: bool
    tokens_after: int
    summarized: int


def identity(conv: _locomo.Conversation, on: bool) -> dict[str, str]:
    """With ``--identity``: the conversation's user (speaker_a) and its own scope, as headers."""
    return {"X-Ctx-User": conv.speaker_a, "X-Ctx-Scope": f"locomo-{conv.sample_id}"} if on else {}


async def post(
    http: aiohttp.ClientSession, proxy: Proxy, body: bytes, tag: str | None, who: dict[str, str] | None = None
) -> Answer:
    headers = dict(HEADERS) | (who or {})
    if tag is not None:
        headers[TAG] = tag
    async with http.post(proxy.url + "/v1/chat/completions", data=body, headers=headers) as r:
        data = await r.read()
        if r.status != 200 or b'"chat.completion"' not in data:
            raise SystemExit(f"proxy ({proxy.strategy}): status {r.status}: {data[:400]!r}\n{proxy.errlog.read_text()}")
        return Answer(
            r.headers.get("X-Ctx-Compacted") == "1",
            int(r.headers.get("X-Ctx-Tokens-After", "-1")),
            int(r.headers.get("X-Ctx-Summarized", "0")),
        )


# --- the replay ---------------------------------------------------------------------------------


class Counter:
    """Token counts of forwarded messages, memoised by their serialised bytes."""

    def __init__(self) -> None:
        self.counter = TokenCounter()
        self.memo: dict[bytes, int] = {}

    def tools(self, definitions: list[dict[str, Any]] | None) -> int:
        return self.counter.count_tools(definitions, MODEL) if definitions else 0

    def count(self, raw: bytes, message: dict[str, Any]) -> int:
        found = self.memo.get(raw)
        if found is None:
            found = self.memo[raw] = self.counter.count_message(message, message_digest(message), MODEL)
        return found


@dataclass
class ReplayStats:
    strategy: str
    limit: int
    requests: int = 0
    full_tokens: int = 0
    forwarded_tokens: int = 0
    peak: int = 0
    peak_full: int = 0  # the full history of the request with the peak
    over_limit: int = 0
    over_window: int = 0
    pairs_plain: int = 0  # consecutive requests, no compaction in between
    hits_plain: int = 0
    pairs_compacted: int = 0  # a new checkpoint in between (X-Ctx-Compacted, or X-Ctx-Summarized moved)
    hits_compacted: int = 0
    cached_tokens: int = 0  # tokens of the leading messages identical to the previous request's
    compacted_responses: int = 0  # X-Ctx-Compacted: 1
    silent_checkpoints: int = 0  # a new checkpoint first seen without X-Ctx-Compacted (made in the background)
    split_turns: int = 0  # new checkpoints whose summary has a "Current turn so far" section
    logged: dict[str, int] = field(default_factory=dict)  # "compaction" log events by reason
    header_mismatch: int = 0
    proxy_cpu: float = 0.0
    wall: float = 0.0
    per_conversation: list[tuple[str, int, float, int]] = field(default_factory=list)  # id, msgs, share, peak

    @property
    def compactions(self) -> int:
        return sum(self.logged.values())


def compaction_events(log: Path) -> dict[str, int]:
    """``compaction`` events (one per checkpoint made) in the proxy's JSON log, by reason."""
    reasons: dict[str, int] = {}
    for line in log.read_bytes().splitlines():
        if b'"compaction"' not in line:
            continue
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if event.get("event") == "compaction":
            reason = str(event.get("reason"))
            reasons[reason] = reasons.get(reason, 0) + 1
    return reasons


async def replay(
    http: aiohttp.ClientSession,
    proxy: Proxy,
    upstream: Upstream,
    conversations: Sequence[_locomo.Conversation],
    counter: Counter,
    identified: bool = False,
) -> ReplayStats:
    stats = ReplayStats(proxy.strategy, WINDOW - reserve_of(proxy.strategy))
    cpu0, t0 = proxy.cpu_seconds(), time.perf_counter()
    for conv in conversations:
        enc = Encoded(conv.messages)
        cumulative = [0]
        for raw, m in zip(enc.parts, conv.messages, strict=True):
            cumulative.append(cumulative[-1] + counter.count(raw, m))
        conv_full = conv_fwd = conv_peak = 0
        prev: list[bytes] | None = None
        prev_summarized = 0
        for r, u in enumerate(conv.user_indices):
            n = u + 1
            tag = f"{proxy.strategy}:{conv.sample_id}:{r}"
            answer = await post(http, proxy, enc.body(n), tag, identity(conv, identified))
            forwarded = orjson.loads(upstream.bodies.pop(tag))
            messages = forwarded["messages"]
            raws = [orjson.dumps(m) for m in messages]
            each = [counter.count(raw, m) for raw, m in zip(raws, messages, strict=True)]
            # ctxproxy's own tool definitions (search_memory, when memory is on) count as prompt too
            tokens = sum(each) + 3 + counter.tools(forwarded.get("tools"))
            full = cumulative[n] + 3
            stats.requests += 1
            stats.full_tokens += full
            stats.forwarded_tokens += tokens
            conv_full += full
            conv_fwd += tokens
            conv_peak = max(conv_peak, tokens)
            if tokens > stats.peak:
                stats.peak, stats.peak_full = tokens, full
            stats.over_limit += tokens > stats.limit
            stats.over_window += tokens > WINDOW
            stats.header_mismatch += answer.tokens_after != tokens
            new_checkpoint = answer.compacted or answer.summarized != prev_summarized
            stats.compacted_responses += answer.compacted
            if new_checkpoint:
                stats.silent_checkpoints += not answer.compacted
                summary = next((m for m in messages if m.get("name") == SUMMARY_NAME), None)
                if summary is not None and SPLIT_TURN_MARK in str(summary.get("content")):
                    stats.split_turns += 1
            if prev is not None:
                k = len(prev) - 1
                hit = len(raws) >= k and raws[:k] == prev[:k]
                if new_checkpoint:
                    stats.pairs_compacted += 1
                    stats.hits_compacted += hit
                else:
                    stats.pairs_plain += 1
                    stats.hits_plain += hit
                if raws[: len(prev)] == prev:
                    common = len(prev)
                else:
                    pairs = enumerate(zip(raws, prev))  # noqa: B905 - the shorter list bounds the prefix
                    common = next((i for i, (a, b) in pairs if a != b), min(len(raws), len(prev)))
                stats.cached_tokens += sum(each[:common])
            prev, prev_summarized = raws, answer.summarized
        stats.per_conversation.append((conv.sample_id, len(conv.messages), conv_fwd / max(conv_full, 1), conv_peak))
    await asyncio.sleep(0.6)  # the proxy's session recorder flushes every 0.25 s
    stats.proxy_cpu = proxy.cpu_seconds() - cpu0
    stats.wall = time.perf_counter() - t0
    return stats


# --- CPU per request at two history sizes -------------------------------------------------------


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

    @property
    def ms_per_request(self) -> float:
        return 1000 * self.cpu / self.requests


async def _catch_up(
    http: aiohttp.ClientSession, proxy: Proxy, enc: Encoded, users: Sequence[int], stride: int, who: dict[str, str]
) -> None:
    """Send the history through every ``stride``-th of ``users``, the last few through every one."""
    tail = 3 * stride
    chosen = list(users) if len(users) <= tail else [*users[:-tail:stride], *users[-tail:]]
    for u in chosen:
        await post(http, proxy, enc.body(u + 1), None, who)


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
    compactions: int = 0
    bodies: list[bytes] = field(default_factory=list)
    wall: float = 0.0
    foreign: float = 0.0  # CPU seconds of other processes (not the proxy, not this one) meanwhile


async def _measure(
    http: aiohttp.ClientSession,
    proxy: Proxy,
    upstream: Upstream,
    enc: Encoded,
    batch: Sequence[int],
    label: str,
    into: Batch,
    quiet_wait: float,
    who: dict[str, str],
) -> None:
    """Add the proxy's CPU over ``batch`` (one request each) to ``into``."""
    await asyncio.sleep(0.6)  # the session recorder flushes every 0.25 s: let the catch-up's flush land first
    await wait_quiet(proxy, quiet_wait)
    busy0, own0, t0 = machine_busy(), time.process_time(), time.perf_counter()
    cpu0 = last = proxy.cpu_seconds()
    for i, u in enumerate(batch):
        tag = f"{label}:{i}"
        answer = await post(http, proxy, enc.body(u + 1), tag, who)
        now = proxy.cpu_seconds()
        into.each.append(now - last)
        last = now
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
    variants: Sequence[_locomo.Conversation],
    sizes: Sequence[int],
    samples: int,
    stride: int,
    counter: Counter,
    quiet_wait: float,
    identified: bool = False,
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
    encs = [Encoded(v.messages) for v in variants]
    done = [0] * len(variants)  # per session: index into its user messages already sent
    for n, size in enumerate(sizes):
        sessions = range(len(variants)) if n == 0 else range(1)
        take = per_session if n == 0 else samples
        measured = Batch()
        lengths: list[int] = []
        for k in sessions:
            users = variants[k].user_indices
            first = next(i for i, u in enumerate(users) if u + 1 >= size)
            batch = users[first : first + take]
            if len(batch) < take:
                raise SystemExit(f"synthetic conversation too short for {take} requests at {size} messages")
            who = identity(variants[k], identified)
            await _catch_up(http, proxy, encs[k], users[done[k] : first], stride if n else 1, who)
            label = f"cpu:{proxy.strategy}:{size}:{k}"
            await _measure(http, proxy, upstream, encs[k], batch, label, measured, quiet_wait, who)
            lengths += [u + 1 for u in batch]
            done[k] = first + take
        forwarded = [orjson.loads(b)["messages"] for b in measured.bodies]  # analysed after the CPU readings
        points.append(
            CpuPoint(
                size,
                len(lengths),
                statistics.fmean(lengths),
                measured.cpu,
                measured.compactions,
                statistics.fmean(len(f) for f in forwarded),
                statistics.fmean(sum(counter.count(orjson.dumps(m), m) for m in f) + 3 for f in forwarded),
                len(sessions),
                statistics.median(measured.each),
                measured.foreign / (measured.wall * CORES) if measured.wall else 0.0,
            )
        )
    return points


# --- report -------------------------------------------------------------------------------------


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def effective_options(
    tmp: Path, upstream_port: int, memory: str = "default"
) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """What the proxy will run with, read back through its own config loader."""
    out = {}
    for strategy in STRATEGIES:
        directory = write_config(tmp / f"check-{strategy}", strategy, upstream_port, memory=memory)
        tenant = load_config(directory).tenants["default"]
        c = tenant.compaction
        general = {
            "summarizer": c.summarizer,
            "mode": c.mode,
            "summary_max_tokens": c.summary_max_tokens,
            "summary_placement": c.summary_placement,
            "default_context_window": tenant.default_context_window,
        }
        options = c.options[strategy].model_dump() if strategy in c.options else {}
        options |= {"memory.enabled": tenant.memory.enabled, "memory.layered": tenant.memory.layered}
        out[strategy] = (general, options)
    return out


def report_options(opts: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> None:
    general = next(iter(opts.values()))[0]
    print("## Configuration\n")
    print(
        f"Model `{MODEL}` (no built-in window applies), "
        f"`default_context_window = {general['default_context_window']}`; "
        f'every tenant: `summarizer = "{general["summarizer"]}"`, `mode = "{general["mode"]}"`, '
        f"`summary_max_tokens = {general['summary_max_tokens']}`, "
        f'`summary_placement = "{general["summary_placement"]}"`. Requests carry no `max_tokens`, so the '
        "budget is the whole window.\n"
    )
    print("| strategy | options (effective, as loaded by `ctxproxy.config.load_config`) | changed from the defaults |")
    print("|---|---|---|")
    for strategy, (_, options) in opts.items():
        shown = ", ".join(f"{k}={v}" for k, v in options.items()) or "-"
        changed = OVERRIDES.get(strategy)
        why = (
            ", ".join(f"{k}={v}" for k, v in changed.items())
            + " (defaults 16384 / 20000 assume ~128k windows: reserve 16384 exceeds an 8k window)"
            if changed
            else "none (defaults)"
        )
        print(f"| {strategy} | {shown} | {why} |")
    print()


def aim(ok: bool) -> str:
    return "met" if ok else "**missed**"


def report_replay(results: list[ReplayStats], conversations: Sequence[_locomo.Conversation]) -> None:
    n_msgs = sum(len(c.messages) for c in conversations)
    n_req = sum(len(c.user_indices) for c in conversations)
    print("## LoCoMo replay\n")
    print(
        f"{len(conversations)} conversation(s) ({', '.join(c.sample_id for c in conversations)}): {n_msgs} messages "
        f"incl. one system message each, {n_req} requests per strategy (one at every user message), sent one at a "
        f"time per strategy. Limit = window − reserve: {WINDOW} − {reserve_of('cut_point')} = "
        f"{WINDOW - reserve_of('cut_point')} for cut_point (its reserve_tokens); the window itself ({WINDOW}) for "
        "the others. Tokens: `TokenCounter` on the bodies the upstream received (messages + 3 priming tokens "
        "+ the tool definitions ctxproxy added).\n"
    )
    print(
        "| strategy | forwarded / full history (tokens, all requests) | peak forwarded (its full history) | limit | "
        "prompts over limit | prefix kept: pairs w/o compaction between | pairs with a compaction between "
        "(prefix kept) | cacheable prefix / forwarded tokens | compactions = summariser calls | "
        "proxy CPU / request |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in results:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(s.logged.items()))
        calls = f"{s.compactions}" + (f" ({reasons})" if reasons else "")
        if s.split_turns:
            calls += f"; +{s.split_turns} split-turn calls"
        if s.silent_checkpoints:
            calls += f"; {s.silent_checkpoints} made in the background"
        base = " (baseline)" if s.strategy == "none" else ""
        print(
            f"| {s.strategy}{base} | {s.forwarded_tokens:,} / {s.full_tokens:,} = "
            f"{pct(s.forwarded_tokens / s.full_tokens)} | {s.peak:,} ({s.peak_full:,}) | {s.limit:,} "
            f"| {s.over_limit} of {s.requests} "
            f"| {s.hits_plain} / {s.pairs_plain} = {pct(s.hits_plain / max(s.pairs_plain, 1))} "
            f"| {s.pairs_compacted} ({s.hits_compacted}) "
            f"| {pct(s.cached_tokens / max(s.forwarded_tokens, 1))} "
            f"| {calls} | {1000 * s.proxy_cpu / max(s.requests, 1):.2f} ms |"
        )
    print()
    mismatches = {s.strategy: s.header_mismatch for s in results if s.header_mismatch}
    print(
        "- `X-Ctx-Tokens-After` agrees with the count of the forwarded body on every request."
        if not mismatches
        else f"- `X-Ctx-Tokens-After` differs from the count of the forwarded body on: {mismatches} requests."
    )
    print(
        "- Compactions: the proxy's `compaction` log events (one per checkpoint made, by plan reason). Each is one "
        "extractive summariser call; a cut_point cut that splits a turn makes one more (counted from the "
        "'Current turn so far' section of the summary forwarded with a new checkpoint). "
        "`X-Ctx-Compacted: 1` responses: "
        + ", ".join(f"{s.strategy} {s.compacted_responses}" for s in results)
        + ". 'Made in the background': a new checkpoint (X-Ctx-Summarized moved) first forwarded without "
        "X-Ctx-Compacted, i.e. made by the engine's pending re-run after a response, not by the request.\n"
        "- A pair has 'a compaction between' when the later request carries X-Ctx-Compacted or a different "
        "X-Ctx-Summarized; 'prefix kept' = forwarded_{t+1}[:len(forwarded_t) − 1] serialises to the same bytes as "
        "forwarded_t[:−1]. 'Cacheable prefix' = tokens of the leading forwarded messages byte-identical to the "
        "previous request's (what a provider prefix cache could reuse), over all forwarded tokens.\n"
        "- Proxy CPU / request: all of the proxy's CPU during the replay (log_level info: one JSON line per "
        "request) over its requests; includes compactions, store writes, and session records.\n"
    )
    print("Per conversation, forwarded / full tokens and peak forwarded prompt:\n")
    print("| conversation | messages | " + " | ".join(s.strategy for s in results) + " |")
    print("|---|---|" + "---|" * len(results))
    for i, conv in enumerate(conversations):
        cells = [f"{pct(s.per_conversation[i][2])}, peak {s.per_conversation[i][3]:,}" for s in results]
        print(f"| {conv.sample_id} | {len(conv.messages)} | " + " | ".join(cells) + " |")
    print()
    print("Aims (strategies other than the `none` baseline):\n")
    for s in results:
        if s.strategy == "none":
            continue
        share = s.forwarded_tokens / s.full_tokens
        print(
            f"- {s.strategy}: no prompt over window − reserve ({s.limit:,}): {aim(s.over_limit == 0)} "
            f"({s.over_limit} over, peak {s.peak:,}; {s.over_window} over the bare window {WINDOW:,}); "
            f"forwarded ≤ 50 % of full: {aim(share <= 0.5)} ({pct(share)})"
        )
    print()


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


# --- main ---------------------------------------------------------------------------------------


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


async def main_async(args: argparse.Namespace, every: list[_locomo.Conversation]) -> int:
    command = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.executable, ROOT), *sys.argv])
    print(f"# ctxproxy compaction benchmark (LoCoMo)\n\ncommand: `{command}` (cwd {ROOT})\n")
    print(
        f"Python {platform.python_version()}, aiohttp {aiohttp.__version__}, {os.cpu_count()} cores "
        f"(affinity {len(os.sched_getaffinity(0))}), {platform.system()} {platform.release()}. Data: "
        f"{args.data} (LoCoMo, Maharana et al. 2024, CC BY-NC 4.0; read at run time, not copied). "
        f"ctxproxy code: {code_state()}.\n"
    )
    conversations = every[: args.conversations]
    strategies = [s for s in STRATEGIES if s in args.strategies]
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="ctxproxy-compaction-"))
    upstream = Upstream()
    await upstream.start()
    report_options({k: v for k, v in effective_options(tmp, upstream.port, args.memory).items() if k in strategies})
    if args.identity:
        print(
            "Every request names its conversation's user and scope (`X-Ctx-User`: speaker_a, `X-Ctx-Scope`: "
            "the sample id): memory layers are per user and scope, and `rounds` sends its layered memory.\n"
        )
    timeout = aiohttp.ClientTimeout(total=300)
    connector = aiohttp.TCPConnector(limit=64)
    proxies: list[Proxy] = []
    try:
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
            # 1. the replay: every strategy in its own proxy process, all at once.
            proxies = [
                start_proxy(s, tmp, upstream.port, "replay", log_level="info", memory=args.memory) for s in strategies
            ]
            for p in proxies:
                await wait_ready(http, p)
            counter = Counter()
            results = await asyncio.gather(
                *(replay(http, p, upstream, conversations, counter, args.identity) for p in proxies)
            )
            for p, stats in zip(proxies, results, strict=True):
                stop(p)
                stats.logged = compaction_events(p.errlog)
            print(f"(replay: {time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
            report_replay(list(results), conversations)

            # 2. CPU per request: one strategy at a time, each in a fresh process.
            sizes = sorted(args.cpu_sizes)
            need = max(sizes) + 4 * args.cpu_samples + 50
            sessions = -(-args.cpu_samples // SMALL_BATCH)
            variants = [
                _locomo.synthetic(every[k % len(every) :] + every[: k % len(every)], need) for k in range(sessions)
            ]
            cpu: dict[str, list[CpuPoint]] = {}
            for strategy in strategies:
                t0 = time.perf_counter()
                proxy = start_proxy(strategy, tmp, upstream.port, "cpu", memory=args.memory)
                proxies.append(proxy)
                await wait_ready(http, proxy)
                cpu[strategy] = await cpu_profile(
                    http,
                    proxy,
                    upstream,
                    variants,
                    sizes,
                    args.cpu_samples,
                    args.stride,
                    counter,
                    args.quiet_wait,
                    args.identity,
                )
                stop(proxy)
                print(f"(cpu {strategy}: {time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
            report_cpu(cpu, len(variants[0].messages), args.cpu_samples, args.stride, args.quick, args.quiet_wait)
    finally:
        for p in proxies:
            stop(p)
        await upstream.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"Total run time {time.perf_counter() - started:.0f} s.")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="locomo10.json (default: ../shared/data/)")
    parser.add_argument("--conversations", type=int, default=None, help="replay the first N (default: all 10)")
    parser.add_argument("--quick", action="store_true", help="2 conversations, fewer CPU samples (< 1 minute)")
    parser.add_argument("--cpu-samples", type=int, default=None, help="measured requests per size (100; quick 20)")
    parser.add_argument(
        "--cpu-sizes", type=int, nargs="+", default=None, help="history sizes in messages (100 3000; quick 100 1000)"
    )
    parser.add_argument("--stride", type=int, default=3, help="catch-up stride in user messages (default 3 = B)")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument(
        "--memory",
        choices=("default", "off"),
        default="default",
        help="default: [memory] as each strategy ships it; off: enabled = false (compaction alone)",
    )
    parser.add_argument(
        "--identity", action="store_true", help="name each conversation's user and scope (X-Ctx-User, X-Ctx-Scope)"
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=None,
        help="max seconds to wait for a quiet machine per CPU batch (5; quick 0)",
    )
    args = parser.parse_args(argv)
    if args.quiet_wait is None:
        args.quiet_wait = 0.0 if args.quick else 5.0
    if args.conversations is None:
        args.conversations = 2 if args.quick else 10
    if args.cpu_samples is None:
        args.cpu_samples = 20 if args.quick else 100
    if args.cpu_sizes is None:
        args.cpu_sizes = [100, 1000] if args.quick else [100, 3000]
    every = _locomo.load(args.data)  # exits 2 with one line when the data is absent or unreadable
    return asyncio.run(main_async(args, every))


if __name__ == "__main__":
    raise SystemExit(main())

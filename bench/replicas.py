"""Replicas on one Redis against one ctxproxy on its own disk: LoCoMo replayed through each setup.

    .venv/bin/python bench/replicas.py            # all 10 conversations, about a minute on 2 cores
    .venv/bin/python bench/replicas.py --quick    # 2 conversations cut to 240 messages, ~10 s

Data: ``--data`` (default ``../shared/data/locomo10.json`` next to the repository; LoCoMo is
CC BY-NC 4.0 and is read at run time, never copied here). Needs ``redis-server`` on the PATH
(Debian's ``redis-server`` package).

Setups: ``diskcache`` (one ``python -m ctxproxy serve`` on a fresh diskcache store), ``redis``
(one on a fresh ``redis-server``), ``redis x3`` (three processes on one fresh ``redis-server``,
requests dealt round-robin across them, as a load balancer would). Each replays the first
``--conversations`` LoCoMo conversations at once, one client each (bench/_locomo.py: a request
at every user message, carrying the history through it, ``X-Session-Id`` per conversation),
through ``rolling_summary`` with an 8,192-token window and the LLM summariser. The upstream is
local, in this process: it answers a user's call at once and a summary call after
``--summary-delay`` seconds (an LLM's time), and counts the summary calls.

Columns:
* req/s: requests answered per second of the replay (all clients together);
* p50 / p99 added: client round-trip time in ms (the upstream answers a user's call at once, so
  this is ctxproxy's own time, plus the summariser's when a request compacts inline);
* compactions: the replicas' ``compaction`` log events; calls/compaction: summary calls the
  upstream got per compaction (1.00: none made twice, none lost);
* restarts: compactions that did not go on from the session's newest checkpoint (its range does
  not start where the last one ended): a replica that missed another's checkpoint;
* reuse: of the requests after a conversation's first compaction that a replica other than the
  one that made the newest checkpoint served, the share it forwarded with that checkpoint
  (or one it made on top of it); "-" with one replica.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
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
import redis
from aiohttp import web

# A load generator that starts its own processes: the few blocking calls run between replays.
# ruff: noqa: ASYNC220, ASYNC221, ASYNC240

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _locomo  # noqa: E402
from _config import proxy_toml  # noqa: E402
from _procs import Server, free_ports, start, stop, wait_ready  # noqa: E402

from ctxproxy.summarize.prompts import system_prompt  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10.json"
MODEL = "locomo-model"
SUMMARY_MAX_TOKENS = 600
SETUPS = {"diskcache": ("diskcache", 1), "redis": ("redis", 1), "redis x3": ("redis", 3)}
TENANT = f"""
default_context_window = 8192
[upstream]
base_url = "{{upstream}}"
learned_window_days = 0
[compaction]
strategy = "rolling_summary"
summarizer = "llm"
summary_timeout = 30
summary_max_tokens = {SUMMARY_MAX_TOKENS}
summary_context_window = 64000
"""
SUMMARY = (
    "### Goal\n- Keep up with a friend over months of chats.\n\n### Key facts\n"
    + "".join(f"- Fact {n}: something said and remembered in the chat so far.\n" for n in range(1, 16))
    + "\n### Decisions\n- Stay in touch every week."
)


def completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


@dataclass
class Upstream:
    """The local upstream: a user's call answered at once, a summary call after ``delay``."""

    delay: float
    summary_calls: int = 0

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        messages = body.get("messages") or []
        if messages and messages[0].get("content") == system_prompt(SUMMARY_MAX_TOKENS):
            self.summary_calls += 1
            await asyncio.sleep(self.delay)
            return web.json_response(completion(SUMMARY))
        return web.json_response(completion("Good to hear from you!"))

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app


@dataclass
class Sent:
    conversation: int
    replica: int
    seconds: float
    compacted: bool
    on_checkpoint: bool  # forwarded smaller than the client's history


@dataclass
class Result:
    setup: str
    replicas: int
    sent: list[Sent] = field(default_factory=list)
    wall: float = 0.0
    compactions: list[dict[str, Any]] = field(default_factory=list)
    summary_calls: int = 0


def start_redis(port: int, tmp: Path) -> subprocess.Popen[bytes]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("bench/replicas.py: redis-server is not installed (apt-get install -y redis-server)")
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_connect_timeout=0.5)
    deadline = time.monotonic() + 15
    while True:
        try:
            client.ping()
            return proc
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"redis-server did not start on port {port}") from None
            time.sleep(0.05)


def write_config(tmp: Path, backend: str, redis_port: int, upstream: str) -> Path:
    config = tmp / "config"
    (config / "tenants").mkdir(parents=True)
    text = proxy_toml(tmp / "store", "info")
    if backend == "redis":
        text = text.replace('backend = "diskcache"', f'backend = "redis"\nurl = "redis://127.0.0.1:{redis_port}/0"')
    (config / "proxy.toml").write_text(text)
    (config / "tenants" / "default.toml").write_text(TENANT.replace("{upstream}", upstream))
    return config


async def replay(
    http: aiohttp.ClientSession, urls: Sequence[str], conversations: Sequence[_locomo.Conversation]
) -> tuple[list[Sent], float]:
    """Every conversation at once, one client each; request k of all goes to ``urls[k % n]``."""
    sent: list[Sent] = []
    dealt = 0

    async def client(index: int, conv: _locomo.Conversation) -> None:
        nonlocal dealt
        headers = {"X-Session-Id": f"locomo-{index}-{conv.sample_id}"}
        for last in conv.user_indices:
            replica, dealt = dealt % len(urls), dealt + 1
            body = {"model": MODEL, "messages": conv.messages[: last + 1], "max_tokens": 256}
            started = time.perf_counter()
            async with http.post(urls[replica] + "/v1/chat/completions", json=body, headers=headers) as resp:
                await resp.read()
                if resp.status != 200:
                    raise SystemExit(f"request failed: {resp.status} {await resp.text()}")
            before, after = int(resp.headers["X-Ctx-Tokens-Before"]), int(resp.headers["X-Ctx-Tokens-After"])
            compacted = resp.headers.get("X-Ctx-Compacted") == "1"
            sent.append(Sent(index, replica, time.perf_counter() - started, compacted, after < before))

    started = time.perf_counter()
    await asyncio.gather(*(client(i, conv) for i, conv in enumerate(conversations)))
    return sent, time.perf_counter() - started


def compaction_events(servers: Sequence[Server]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for server in servers:
        for line in server.errlog.read_text(errors="replace").splitlines():
            if '"event":"compaction"' in line:
                found.append(json.loads(line))
    return found


async def run_setup(name: str, upstream: Upstream, upstream_url: str, convs: list[_locomo.Conversation]) -> Result:
    backend, count = SETUPS[name]
    result = Result(name, count)
    with tempfile.TemporaryDirectory(prefix="ctxproxy-replicas-") as scratch:
        tmp = Path(scratch)
        redis_port, *ports = free_ports(count + 1)
        redis_proc = start_redis(redis_port, tmp) if backend == "redis" else None
        config = write_config(tmp, backend, redis_port, upstream_url)
        argv = ["-m", "ctxproxy", "serve", "--config", str(config), "--port"]
        servers = [start(f"r{i}", [*argv, str(port)], port, tmp, keep_stdout=True) for i, port in enumerate(ports)]
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
                await wait_ready(http, servers)
                calls = upstream.summary_calls
                result.sent, result.wall = await replay(http, [s.url for s in servers], convs)
                result.summary_calls = upstream.summary_calls - calls
        finally:
            stop(servers)
            if redis_proc is not None:
                redis_proc.terminate()
                redis_proc.wait(10)
        result.compactions = compaction_events(servers)
    return result


def restarts(compactions: list[dict[str, Any]]) -> int:
    """Compactions whose range does not start where the session's previous one ended."""
    ends: dict[str, int] = {}
    count = 0
    for event in sorted(compactions, key=lambda e: e["timestamp"]):
        start_at, end = event["range"]
        previous = ends.get(event["session"])
        if previous is not None and start_at < previous:
            count += 1
        ends[event["session"]] = max(end, previous or 0)
    return count


def cross_replica_reuse(result: Result) -> str:
    if result.replicas == 1:
        return "-"
    maker: dict[int, int] = {}
    reused = candidates = 0
    for sent in result.sent:  # in the order they were answered, per conversation too
        if sent.conversation in maker and sent.replica != maker[sent.conversation]:
            candidates += 1
            reused += sent.on_checkpoint
        if sent.compacted:
            maker[sent.conversation] = sent.replica
    return f"{100 * reused / candidates:.1f} %" if candidates else "-"


def report(results: list[Result]) -> None:
    print(f"\n{'setup':<10} {'req':>5} {'req/s':>7} {'p50 added':>10} {'p99 added':>10} "
          f"{'compactions':>11} {'calls/compaction':>16} {'restarts':>8} {'reuse':>8}")  # fmt: skip
    for r in results:
        ms = sorted(s.seconds * 1000 for s in r.sent)
        p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
        per = f"{r.summary_calls / len(r.compactions):.2f}" if r.compactions else "-"
        print(
            f"{r.setup:<10} {len(r.sent):>5} {len(r.sent) / r.wall:>7.1f} {statistics.median(ms):>8.1f}ms "
            f"{p99:>8.1f}ms {len(r.compactions):>11} {per:>16} {restarts(r.compactions):>8} "
            f"{cross_replica_reuse(r):>8}"
        )


async def main_async(args: argparse.Namespace) -> int:
    convs = _locomo.load(args.data)[: args.conversations]
    if args.messages:
        convs = [dataclasses.replace(c, messages=c.messages[: args.messages]) for c in convs]
    upstream = Upstream(args.summary_delay)
    runner = web.AppRunner(upstream.app(), access_log=None)
    await runner.setup()
    (port,) = free_ports(1)
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print(f"{len(convs)} LoCoMo conversations, {sum(len(c.user_indices) for c in convs)} requests per setup")
    results = []
    try:
        for name in args.setups:
            results.append(await run_setup(name, upstream, f"http://127.0.0.1:{port}/v1", convs))
            print(f"  {name}: done in {results[-1].wall:.1f}s", flush=True)
    finally:
        await runner.cleanup()
    report(results)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="locomo10.json (default: ../shared/data/)")
    parser.add_argument("--conversations", type=int, default=None, help="replayed at once (default all 10; quick 2)")
    parser.add_argument("--messages", type=int, default=None, help="cut each conversation to N messages (quick 240)")
    parser.add_argument("--summary-delay", type=float, default=0.2, help="seconds a summary call takes (0.2)")
    parser.add_argument("--setups", nargs="+", default=list(SETUPS), choices=list(SETUPS))
    parser.add_argument("--quick", action="store_true", help="2 conversations of 240 messages (< 1 minute)")
    args = parser.parse_args(argv)
    if args.conversations is None:
        args.conversations = 2 if args.quick else 10
    if args.messages is None and args.quick:
        args.messages = 240
    if not Path(args.data).is_file():
        parser.error(f"--data {args.data}: no such file (LoCoMo's locomo10.json, see ../shared/data/README.md)")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())

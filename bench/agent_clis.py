"""The real agent CLIs (Claude Code, Codex) end to end through ctxproxy, by base URL only.

    .venv/bin/python bench/agent_clis.py                    # every strategy, the models' own windows
    .venv/bin/python bench/agent_clis.py --window 100000 --log-lines 300   # compaction within a run
    .venv/bin/python bench/agent_clis.py --strategies none cut_point --sessions claude codex
    .venv/bin/python bench/agent_clis.py --capture DIR      # no proxy: record what the CLIs send

The CLIs are ``claude`` and ``codex`` from ``--bin-dir``, else ``./node_modules/.bin``, else PATH
(``npm install @anthropic-ai/claude-code @openai/codex``); without them the script says so and
exits 0. Nothing leaves loopback: the model is a scripted fake upstream (``bench/_agent_upstream.py``,
in this process) speaking Anthropic's Messages API and OpenAI's Responses API, streaming included; it
answers the first request of a task about ``a.log`` with a call of the CLI's shell tool, the CLI
runs ``grep ERROR a.log`` and sends the result back, the fake calls ``grep WARN a.log`` next, and
answers that result with final text. ``--log-lines N``: a.log's ERROR and WARN lines (N of each).

Per strategy, a fresh ``ctxproxy serve`` (its own process, config directory and store; one tenant,
summarizer ``extractive``; with ``--window N`` the ``claude*`` and ``gpt*`` models get a window of
N tokens: 100000 with 300 lines of each kind in a.log, ~8k tokens a tool result, makes the task's
and its ``--continue``'s requests compact, the window also holding the 64000 tokens of answer
Claude Code asks for) sits behind a loopback tap (``bench/_agent_tap.py``) that notes the status
and ``X-Ctx-*`` headers each CLI request got (Codex's Responses requests included; its remote
compaction is answered by ctxproxy, which this fake then never sees). ``--keep DIR`` keeps ctxproxy's logs and the CLIs'
homes. The sessions (``bench/_agent_runs.py``), each in a throwaway home:

* ``claude``: ``claude -p "say hi"``; ``claude -p "Count the ERROR and WARN lines in a.log"``
  (Bash allowed); ``claude -p --continue "..."``; ``claude-older``: the same with ``--model
  claude-sonnet-4-5``;
* ``codex``: ``codex exec "say hi"``; the same task (its ``exec_command`` tool); ``codex exec resume
  --last "..."``, through a ``[model_providers.ctxproxy]`` block (``wire_api = "responses"``);
  ``codex-compact``: the task with ``model_auto_compact_token_limit = 50`` (Codex compacts with a
  request of its own); ``codex-openai``: the same through the built-in OpenAI provider with
  ``openai_base_url`` (a WebSocket first, then remote compaction with a ``compaction_trigger`` item).

Printed as Markdown: one row per CLI run — its exit code, the requests the fake upstream saw
during it (ctxproxy's own included), the statuses the CLI got (``200×3 404``), the
``X-Ctx-Strategy`` it got, the largest prompt ctxproxy counted in the run before → after
compaction (``C``: a request compacted), and whether it worked: exit code 0 and the fake model's
final answer printed; then per session and strategy, the runs that worked.

``--capture DIR`` runs the same sessions against the fake directly and writes every request as a
fixture, ``DIR/<client>/<scenario>-NN.json`` (``{client, scenario, method, path, headers, raw}``:
credential headers dropped, the key replaced in the body), the form of ``tests/fixtures/agents/``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from _agent_report import Row, runs_table, sessions_table  # noqa: E402
from _agent_runs import CLIENT_KEY, SESSIONS, Session, find_binaries, run_sessions  # noqa: E402
from _agent_tap import Tap  # noqa: E402
from _agent_upstream import AgentUpstream, write_fixture  # noqa: E402
from _config import proxy_toml  # noqa: E402
from _procs import free_ports, start, stop, wait_ready  # noqa: E402

STRATEGIES = ("none", "sliding_window", "rolling_summary", "rounds", "cut_point", "paged")
TENANT = """\
[upstream]
base_url = "{upstream}/v1"
read_timeout = 120

[compaction]
strategy = "{strategy}"
summarizer = "extractive"
"""
WINDOW = """
[models."claude*"]
context_window = {window}

[models."gpt*"]
context_window = {window}
"""


async def serve(app: web.Application, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def capture(args: argparse.Namespace, sessions: list[Session], binaries: dict[str, Path]) -> int:
    fake = AgentUpstream()
    (port,) = free_ports(1)
    runner = await serve(fake.make_app(), port)
    try:
        with tempfile.TemporaryDirectory(prefix="agent-capture-") as tmp:
            steps = await run_sessions(
                sessions, binaries, f"http://127.0.0.1:{port}", Path(tmp), [fake], args.timeout, args.log_lines
            )
    finally:
        await runner.cleanup()
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for captured in fake.requests:
        key = (captured.client, captured.scenario)
        counts[key] += 1
        path = write_fixture(captured, args.capture / captured.client, counts[key], (CLIENT_KEY,))
        print(f"{path}  {captured.method} {captured.path}  {len(captured.body)} bytes")
    for ran in steps:
        state = "ok" if ran.worked else "FAILED"
        print(f"{ran.client:12} {ran.scenario:16} exit {ran.exit_code:3}  {state}  {ran.seconds:.1f}s")
    return 0 if all(ran.worked for ran in steps) else 1


def write_config(directory: Path, upstream: str, strategy: str, window: int | None) -> Path:
    (directory / "tenants").mkdir(parents=True)
    (directory / "proxy.toml").write_text(proxy_toml(directory / "store", "info"))
    tenant = TENANT.format(upstream=upstream, strategy=strategy)
    (directory / "tenants" / "default.toml").write_text(tenant + (WINDOW.format(window=window) if window else ""))
    return directory


async def bench_strategy(
    strategy: str, args: argparse.Namespace, sessions: list[Session], binaries: dict[str, Path], tmp: Path
) -> list[Row]:
    fake = AgentUpstream()
    fake_port, proxy_port, tap_port = free_ports(3)
    fake_runner = await serve(fake.make_app(), fake_port)
    config = write_config(tmp / f"config-{strategy}", f"http://127.0.0.1:{fake_port}", strategy, args.window)
    argv = ["-m", "ctxproxy", "serve", "--config", str(config), "--port", str(proxy_port)]
    proxy = start(f"ctxproxy-{strategy}", argv, proxy_port, tmp, keep_stdout=True)
    tap = Tap(proxy.url)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as http:
            await wait_ready(http, [proxy])
            tap_runner = await serve(tap.make_app(http), tap_port)
            try:
                steps = await run_sessions(
                    sessions,
                    binaries,
                    f"http://127.0.0.1:{tap_port}",
                    tmp / strategy,
                    [fake, tap],
                    args.timeout,
                    args.log_lines,
                )
            finally:
                await tap_runner.cleanup()
    finally:
        stop([proxy])
        await fake_runner.cleanup()
    rows = []
    for ran in steps:
        label = (ran.client, ran.scenario)
        upstream = sum(1 for r in fake.requests if (r.client, r.scenario) == label)
        rows.append(Row(ran, strategy, upstream, [s for s in tap.seen if s.label == label]))
    return rows


async def main_async(args: argparse.Namespace) -> int:
    binaries = find_binaries(args.bin_dir)
    sessions = [s for s in SESSIONS if s.name in args.sessions and s.client in binaries]
    missing = sorted({s.client for s in SESSIONS if s.name in args.sessions} - set(binaries))
    if missing:
        print(f"agent_clis: skipping {', '.join(missing)}: CLI not found (--bin-dir, ./node_modules/.bin, PATH)")
    if not sessions:
        print(
            "agent_clis: no agent CLI installed; nothing to run (npm install @anthropic-ai/claude-code @openai/codex)"
        )
        return 0
    if args.capture is not None:
        return await capture(args, sessions, binaries)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="agent-clis-") as tmp:
        work = args.keep or Path(tmp)
        for strategy in args.strategies:
            rows += await bench_strategy(strategy, args, sessions, binaries, work)
    window = f"window {args.window} tokens" if args.window else "the models' own windows"
    print(f"\nClaude Code and Codex through ctxproxy ({window}, summarizer extractive):\n")
    print(runs_table(rows))
    print("\nRuns that worked, per session and strategy (C: ctxproxy compacted in one):\n")
    print(sessions_table(rows, args.strategies))
    worked = sum(r.ran.worked for r in rows)
    print(f"\n{worked} of {len(rows)} CLI runs worked.")
    return 0 if worked == len(rows) else 1


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", type=Path, help="where claude and codex are (default ./node_modules/.bin, PATH)")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument("--sessions", nargs="+", default=[s.name for s in SESSIONS], choices=[s.name for s in SESSIONS])
    parser.add_argument("--window", type=int, help="context window of claude* and gpt* models (tokens)")
    parser.add_argument("--log-lines", type=int, default=3, help="ERROR and WARN lines (each) in the task's a.log")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds a CLI run may take")
    parser.add_argument("--keep", type=Path, help="work here and keep it (ctxproxy's logs, the CLIs' homes)")
    parser.add_argument("--capture", type=Path, help="no proxy: write what the CLIs send to this directory")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(asyncio.run(main_async(parse_args())))

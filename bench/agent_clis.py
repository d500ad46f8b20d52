"""The real agent CLIs (Claude Code, Codex) end to end through ctxproxy, by base URL only.

    .venv/bin/python bench/agent_clis.py                    # every strategy, the models' own windows
    .venv/bin/python bench/agent_clis.py --window 8000      # a small window: every strategy compacts
    .venv/bin/python bench/agent_clis.py --strategies none cut_point --sessions claude codex
    .venv/bin/python bench/agent_clis.py --capture DIR      # no proxy: record what the CLIs send

The CLIs are ``claude`` and ``codex`` from ``--bin-dir``, else ``./node_modules/.bin``, else PATH
(``npm install @anthropic-ai/claude-code @openai/codex``); without them the script says so and
exits 0. Nothing leaves loopback: the model is a scripted fake upstream (``bench/_agent_upstream.py``,
in this process) speaking Anthropic's Messages API and OpenAI's Responses API, streaming included; it
answers the first request of a task about ``a.log`` with a call of the CLI's shell tool, the CLI
runs ``grep -c ERROR a.log`` and sends the result back, and the fake answers with final text.

Per strategy, a fresh ``ctxproxy serve`` (its own process, config directory and store; one tenant,
summarizer ``extractive``; with ``--window N`` the ``claude*`` and ``gpt*`` models get a window of
N tokens) sits behind a loopback tap (``bench/_agent_tap.py``) that notes the status and ``X-Ctx-*``
headers each CLI request got. The sessions (``bench/_agent_runs.py``), each in a throwaway home:

* ``claude``: ``claude -p "say hi"``; ``claude -p "Count the ERROR lines in a.log"`` (Bash allowed);
  ``claude -p --continue "..."``; ``claude-older``: the same with ``--model claude-sonnet-4-5``;
* ``codex``: ``codex exec "say hi"``; the same task (its ``exec_command`` tool); ``codex exec resume
  --last "..."``, through a ``[model_providers.ctxproxy]`` block (``wire_api = "responses"``);
  ``codex-compact``: the task with ``model_auto_compact_token_limit = 50`` (Codex compacts with a
  request of its own); ``codex-openai``: the same through the built-in OpenAI provider with
  ``openai_base_url`` (a WebSocket first, then remote compaction with a ``compaction_trigger`` item).

Columns: client, scenario, strategy; exit: the CLI's exit code; up: requests the fake upstream saw
during the step (ctxproxy's own included); client: the statuses the CLI got (``200×3 404``);
X-Ctx: the strategy and the largest tokens before→after seen, ``C`` when a request compacted; ok:
the exit code is 0 and the CLI printed the fake model's final answer.

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
import textwrap
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from _agent_runs import CLIENT_KEY, SESSIONS, Labelled, Session, find_binaries, prepare, run_step  # noqa: E402
from _agent_tap import Seen, Tap  # noqa: E402
from _agent_upstream import AgentUpstream, write_fixture  # noqa: E402
from _config import proxy_toml  # noqa: E402
from _procs import free_ports, start, stop, wait_ready  # noqa: E402

STRATEGIES = ("none", "sliding_window", "rolling_summary", "rounds", "cut_point", "paged")
# What each step's final output must contain for the run to count as working.
EXPECTED = {"oneshot": "fake upstream answering", "exec": "fake upstream answering",
            "continue": "fake upstream answering", "resume": "fake upstream answering",
            "tool": "The command printed", "compact": "fake upstream answering",
            "openai-compact": "The command printed"}  # fmt: skip
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


def expected(scenario: str) -> str:
    return EXPECTED[scenario.removesuffix("-older")]


async def run_sessions(
    sessions: list[Session],
    binaries: dict[str, Path],
    base_url: str,
    root: Path,
    labels: list[Labelled],
    timeout: float,
) -> list[tuple[str, str, int, bool, float]]:
    """Run every step; ``labels`` are the objects whose ``label`` names the step being run. Answers
    (client, scenario, exit code, worked, seconds) per step."""
    done = []
    for session in sessions:
        env = prepare(session, root / session.name, base_url)
        for step in session.steps:
            for holder in labels:
                holder.label = (session.client, step.scenario)
            code, seconds, output = await run_step(
                binaries[session.client], step, env, root / session.name / "work", timeout
            )
            worked = code == 0 and expected(step.scenario) in output
            if not worked:
                print(f"  {session.client} {step.scenario}: exit {code}\n{textwrap.indent(output[-1500:], '    | ')}")
            done.append((session.client, step.scenario, code, worked, seconds))
    return done


async def capture(args: argparse.Namespace, sessions: list[Session], binaries: dict[str, Path]) -> int:
    fake = AgentUpstream()
    (port,) = free_ports(1)
    runner = await serve(fake.make_app(), port)
    try:
        with tempfile.TemporaryDirectory(prefix="agent-capture-") as tmp:
            steps = await run_sessions(sessions, binaries, f"http://127.0.0.1:{port}", Path(tmp), [fake], args.timeout)
    finally:
        await runner.cleanup()
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for captured in fake.requests:
        key = (captured.client, captured.scenario)
        counts[key] += 1
        path = write_fixture(captured, args.capture / captured.client, counts[key], (CLIENT_KEY,))
        print(f"{path}  {captured.method} {captured.path}  {len(captured.body)} bytes")
    for client, scenario, code, worked, seconds in steps:
        print(f"{client:12} {scenario:16} exit {code:3}  {'ok' if worked else 'FAILED'}  {seconds:.1f}s")
    return 0 if all(s[3] for s in steps) else 1


def ctx_summary(seen: list[Seen]) -> str:
    answered = [s.ctx for s in seen if "x-ctx-tokens-before" in s.ctx]
    if not answered:
        return "-"
    strategies = sorted({c.get("x-ctx-strategy", "?") for c in answered})
    peak = max(answered, key=lambda c: int(c["x-ctx-tokens-before"]))
    compacted = "C" if any(c.get("x-ctx-compacted") == "1" for c in answered) else ""
    return f"{'/'.join(strategies)} {peak['x-ctx-tokens-before']}→{peak.get('x-ctx-tokens-after', '?')} {compacted}"


def statuses(seen: list[Seen]) -> str:
    counts = collections.Counter(s.status for s in seen)
    return " ".join(f"{status}×{n}" if n > 1 else str(status) for status, n in sorted(counts.items()))


def write_config(directory: Path, upstream: str, strategy: str, window: int | None) -> Path:
    (directory / "tenants").mkdir(parents=True)
    (directory / "proxy.toml").write_text(proxy_toml(directory / "store", "info"))
    tenant = TENANT.format(upstream=upstream, strategy=strategy)
    (directory / "tenants" / "default.toml").write_text(tenant + (WINDOW.format(window=window) if window else ""))
    return directory


async def bench_strategy(
    strategy: str, args: argparse.Namespace, sessions: list[Session], binaries: dict[str, Path], tmp: Path
) -> list[list[str]]:
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
                    sessions, binaries, f"http://127.0.0.1:{tap_port}", tmp / strategy, [fake, tap], args.timeout
                )
            finally:
                await tap_runner.cleanup()
    finally:
        stop([proxy])
        await fake_runner.cleanup()
    rows = []
    for client, scenario, code, worked, seconds in steps:
        seen = [s for s in tap.seen if s.label == (client, scenario)]
        upstream = sum(1 for r in fake.requests if (r.client, r.scenario) == (client, scenario))
        rows.append([client, scenario, strategy, str(code), str(upstream), statuses(seen), ctx_summary(seen),
                     "yes" if worked else "NO", f"{seconds:.1f}"])  # fmt: skip
    return rows


def print_table(rows: list[list[str]]) -> None:
    head = ["client", "scenario", "strategy", "exit", "up", "client saw", "X-Ctx (strategy before→after)", "ok", "s"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


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
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="agent-clis-") as tmp:
        work = args.keep or Path(tmp)
        for strategy in args.strategies:
            rows += await bench_strategy(strategy, args, sessions, binaries, work)
    window = f"window {args.window} tokens" if args.window else "the models' own windows"
    print(f"\nClaude Code and Codex through ctxproxy ({window}, summarizer extractive):\n")
    print_table(rows)
    failed = [r for r in rows if r[7] != "yes"]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} CLI runs worked.")
    return 1 if failed else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", type=Path, help="where claude and codex are (default ./node_modules/.bin, PATH)")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument("--sessions", nargs="+", default=[s.name for s in SESSIONS], choices=[s.name for s in SESSIONS])
    parser.add_argument("--window", type=int, help="context window of claude* and gpt* models (tokens)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds a CLI run may take")
    parser.add_argument("--keep", type=Path, help="work here and keep it (ctxproxy's logs, the CLIs' homes)")
    parser.add_argument("--capture", type=Path, help="no proxy: write what the CLIs send to this directory")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(asyncio.run(main_async(parse_args())))

"""The agent CLIs' sessions as a user runs them, each in a throwaway home and working directory.

A :class:`Session` is a list of :class:`Step` s run one after the other in the same home and
directory (so ``claude -p --continue`` and ``codex exec resume --last`` find the previous run). Each
CLI reaches the model only by its base URL (``ANTHROPIC_BASE_URL``; Codex's ``config.toml``), and
runs with a minimal environment: nothing of this process's own configuration, no update checks, no
telemetry, no error reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from _agent_replies import TOOL_FILE

CLIENT_KEY = "sk-agent-bench-not-a-real-key"  # what the CLIs present; never a real key
TOOL_PROMPT = f"Count the ERROR and WARN lines in {TOOL_FILE}"
OLDER_CLAUDE = "claude-sonnet-4-5"
CODEX_MODEL = "gpt-5.5"
# Codex's own provider block, named "ctxproxy": no WebSocket, compaction as an ordinary request.
CODEX_PROVIDER = """model = "{model}"
model_provider = "ctxproxy"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.ctxproxy]
name = "ctxproxy"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "CTXPROXY_CLIENT_KEY"
"""
# The built-in OpenAI provider pointed elsewhere: WebSocket first, remote compaction.
CODEX_OPENAI = """model = "{model}"
openai_base_url = "{base_url}/v1"
check_for_update_on_startup = false

[analytics]
enabled = false
"""


class Labelled(Protocol):
    """What records requests under the (client, scenario) being run: the fake, the tap."""

    label: tuple[str, str]


@dataclass(frozen=True)
class Step:
    scenario: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Session:
    """Steps of one client run in one home; ``codex_config`` is Codex's config.toml template."""

    client: str  # "claude_code" or "codex"
    name: str
    steps: tuple[Step, ...]
    codex_config: str = CODEX_PROVIDER


def _claude(model: str | None, suffix: str = "") -> Session:
    chosen = ("--model", model) if model else ()
    allow = ("--allowedTools", "Bash(grep:*)", "Read")
    return Session(
        "claude_code",
        "claude" + suffix,
        (
            Step(f"oneshot{suffix}", ("-p", "say hi", *chosen)),
            Step(f"tool{suffix}", ("-p", TOOL_PROMPT, *allow, *chosen)),
            Step(f"continue{suffix}", ("-p", "--continue", "Thanks. Which file did you read?", *allow, *chosen)),
        ),
    )


# What a step's output must contain for it to count as working: the fake model's final answer.
EXPECTED = {"oneshot": "fake upstream answering", "exec": "fake upstream answering",
            "continue": "fake upstream answering", "resume": "fake upstream answering",
            "tool": "The command printed", "compact": "fake upstream answering",
            "openai-compact": "The command printed"}  # fmt: skip
_EXEC = ("exec", "--skip-git-repo-check")
_COMPACT_SOON = ("-c", "model_auto_compact_token_limit=50")  # the fake reports 112 tokens a turn

SESSIONS: tuple[Session, ...] = (
    _claude(None),
    _claude(OLDER_CLAUDE, "-older"),
    Session(
        "codex",
        "codex",
        (
            Step("exec", (*_EXEC, "say hi")),
            Step("tool", (*_EXEC, TOOL_PROMPT)),
            Step("resume", (*_EXEC, "resume", "--last", "Thanks. Which file was it?")),
        ),
    ),
    Session("codex", "codex-compact", (Step("compact", (*_EXEC, *_COMPACT_SOON, TOOL_PROMPT)),)),
    Session("codex", "codex-openai", (Step("openai-compact", (*_EXEC, *_COMPACT_SOON, TOOL_PROMPT)),), CODEX_OPENAI),
)


@dataclass(frozen=True)
class Ran:
    """One step as it ran: the CLI's exit code, whether it printed the fake model's final answer
    (:data:`EXPECTED`), and how long it took."""

    client: str
    session: str
    scenario: str
    exit_code: int
    worked: bool
    seconds: float


def find_binaries(bin_dir: Path | None) -> dict[str, Path]:
    """``claude`` and ``codex`` from ``bin_dir``, else ``./node_modules/.bin``, else PATH."""
    found: dict[str, Path] = {}
    for client, name in (("claude_code", "claude"), ("codex", "codex")):
        places = [d / name for d in (bin_dir, Path.cwd() / "node_modules" / ".bin") if d is not None]
        on_path = shutil.which(name)
        candidates = [p for p in places if p.is_file() and os.access(p, os.X_OK)] + ([Path(on_path)] if on_path else [])
        if candidates:
            found[client] = candidates[0]
    return found


def log_text(lines: int) -> str:
    """``a.log``: ``lines`` INFO, ERROR and WARN lines each, about 80 characters a line."""
    out = []
    for k in range(lines):
        stamp = f"2026-11-27T10:{k // 60 % 60:02d}:{k % 60:02d}"
        out.append(f"{stamp} INFO  worker-{k % 17:02d} request {k:05d} served in {(k * 37) % 900 + 12} ms")
        out.append(f"{stamp} ERROR worker-{k % 17:02d} disk full on /var/data/part-{k:05d} (retry {k % 5})")
        out.append(f"{stamp} WARN  worker-{k % 17:02d} queue depth {(k * 13) % 500} above the soft limit")
    return "\n".join(out) + "\n"


def prepare(session: Session, root: Path, base_url: str, log_lines: int) -> dict[str, str]:
    """The session's home, working directory (``a.log`` of ``log_lines`` lines of each kind) and
    (Codex) config; the CLI's environment."""
    home, work = root / "home", root / "work"
    work.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    (work / TOOL_FILE).write_text(log_text(log_lines))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TERM": "dumb",
        "NO_COLOR": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    if session.client == "claude_code":
        env.update(ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY=CLIENT_KEY)
    else:
        codex_home = home / ".codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(session.codex_config.format(model=CODEX_MODEL, base_url=base_url))
        env.update(CODEX_HOME=str(codex_home), CTXPROXY_CLIENT_KEY=CLIENT_KEY, OPENAI_API_KEY=CLIENT_KEY)
    return env


async def run_step(binary: Path, step: Step, env: dict[str, str], cwd: Path, timeout: float) -> tuple[int, float, str]:
    """Run one CLI invocation; its exit code (-9: killed at ``timeout``), seconds, and output."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        str(binary), *step.args, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        out, _ = await proc.communicate()
    code = proc.returncode if proc.returncode is not None else -9
    return code, time.monotonic() - started, out.decode(errors="replace")


async def run_sessions(
    sessions: Sequence[Session],
    binaries: dict[str, Path],
    base_url: str,
    root: Path,
    labels: Sequence[Labelled],
    timeout: float,
    log_lines: int,
) -> list[Ran]:
    """Run every step of ``sessions`` against ``base_url``, each session in its own directory under
    ``root``; ``labels`` (the fake, the tap) are told the step being run. A step that did not work
    has its output's end printed."""
    done = []
    for session in sessions:
        env = prepare(session, root / session.name, base_url, log_lines)
        for step in session.steps:
            for holder in labels:
                holder.label = (session.client, step.scenario)
            cwd = root / session.name / "work"
            code, seconds, output = await run_step(binaries[session.client], step, env, cwd, timeout)
            worked = code == 0 and EXPECTED[step.scenario.removesuffix("-older")] in output
            if not worked:
                print(f"  {session.client} {step.scenario}: exit {code}\n{textwrap.indent(output[-1500:], '    | ')}")
            done.append(Ran(session.client, session.name, step.scenario, code, worked, seconds))
    return done

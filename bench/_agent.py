"""A long coding-agent session made of real tool output, for bench/compaction.py.

A scripted agent studies this repository one module at a time, as a user asked it to: it lists
the module's definitions, reads it, finds who imports it, reads its history and its tests, runs
some of them, looks at a diff and at the packages it depends on, and answers. Every tool result
is the output of a real command run while the benchmark starts (``git``, ``pytest -q``,
``pip show -f``, ``pip list --format json``), cut to ``MAX_RESULT_CHARS`` as agents cut what a
command prints. Git commands read the fixed commit ``ANCHOR``, so the session is the same
whatever the checkout's HEAD; ``pytest`` and ``pip`` run on the working tree and the venv.

The session is kept in a neutral form (``Step``: a user message, an assistant message with its
tool calls, or the results of those calls, sometimes with a line the user typed while the tools
ran) and rendered in both protocols: OpenAI chat (``tool_calls`` and ``tool`` messages) and
Anthropic Messages (``tool_use`` and ``tool_result`` blocks, system and breakpoints as Claude
Code sends them). The client resends the whole session at every user message and after every
batch of tool results, as an agent does. The assistant's words are short and written from what
the tools printed; the upstream's answers are ignored.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
ANCHOR = "89b1b80"  # the commit git commands read (main on 2026-11-28)
MAX_RESULT_CHARS = 8000
PYTEST_TIMEOUT = 300
DEPENDENCIES = ("aiohttp", "orjson", "pydantic", "structlog", "tiktoken", "prometheus_client", "diskcache", "redis")

SYSTEM = (
    "You are a coding agent working in a Python repository (ctxproxy, a reverse proxy for LLM APIs that "
    "compacts long conversations). You can run shell commands, read files and search the code with the tools "
    "given. Read before you change anything; prefer small, tested changes; run the tests you touch; say what "
    "you found with file paths and line numbers. Be brief: the user reads every line.\n\n"
    f"Environment: working directory {ROOT.name}/ (a git repository), Python {sys.version.split()[0]}, "
    "Linux. Tool output longer than 8,000 characters is cut."
)
# Each protocol's client says which it is: the two replays of one window are two conversations,
# not one session (ctxproxy names a session by its first messages, in its own message model).
CLIENTS = {
    "chat": "Client: an agent on OpenAI's chat completions.",
    "messages": "Client: an agent on Anthropic's Messages.",
}

TOOLS: tuple[dict[str, Any], ...] = (
    {
        "name": "bash",
        "description": "Run a command in the repository's root and return what it prints (stdout and stderr).",
        "schema": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "the command line"}},
            "required": ["command"],
        },
    },
    {
        "name": "read_file",
        "description": "Read a file of the repository, with line numbers.",
        "schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "revision": {"type": "string"}},
            "required": ["path"],
        },
    },
    {
        "name": "grep",
        "description": "Search the repository for a regular expression; file:line:text for each match.",
        "schema": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "paths": {"type": "array", "items": {"type": "string"}}},
            "required": ["pattern"],
        },
    },
)


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Step:
    role: Literal["user", "assistant", "results"]
    text: str = ""
    calls: tuple[Call, ...] = ()
    results: tuple[tuple[str, str], ...] = ()  # (call id, output), for role "results"
    note: str = ""  # role "results": what the user typed while the tools ran


@dataclass(frozen=True)
class Session:
    steps: tuple[Step, ...]
    commands: int  # distinct commands run to make it

    @property
    def requests(self) -> int:
        return sum(1 for s in self.steps if s.role != "assistant")


def _cut(text: str) -> str:
    if len(text) <= MAX_RESULT_CHARS:
        return text or "(no output)"
    return text[:MAX_RESULT_CHARS] + f"\n… [{len(text) - MAX_RESULT_CHARS} more characters cut]"


@dataclass
class Shell:
    """Runs each distinct command once (git on ``ANCHOR``, pytest and pip on the working tree)."""

    done: dict[tuple[str, ...], str] = field(default_factory=dict)

    def run(self, argv: Sequence[str], timeout: float = 60) -> str:
        key = tuple(argv)
        if key not in self.done:
            proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
            self.done[key] = (proc.stdout + proc.stderr).rstrip("\n")
        return self.done[key]

    def bash(self, command: str) -> str:
        argv = shlex.split(command)
        if argv[:1] in (["pytest"], ["pip"]):  # this benchmark's own interpreter and venv
            argv = [sys.executable, "-m", *argv]
        return self.run(argv, PYTEST_TIMEOUT)

    def read_file(self, path: str, revision: str = ANCHOR) -> str:
        text = self.run(["git", "show", f"{revision}:{path}"])
        return "\n".join(f"{n:>5}\t{line}" for n, line in enumerate(text.splitlines(), 1))

    def grep(self, pattern: str, paths: Sequence[str]) -> str:
        return self.run(["git", "grep", "-n", "-E", "-e", pattern, ANCHOR, "--", *paths]).replace(f"{ANCHOR}:", "")

    def answer(self, call: Call) -> str:
        handlers: dict[str, Callable[..., str]] = {"bash": self.bash, "read_file": self.read_file, "grep": self.grep}
        return _cut(handlers[call.name](**call.arguments))


class Script:
    """Writes the session step by step, running each call as it is made."""

    def __init__(self, shell: Shell) -> None:
        self.shell = shell
        self.steps: list[Step] = []
        self.calls = 0

    def user(self, text: str) -> None:
        self.steps.append(Step("user", text))

    def act(self, text: str, *calls: tuple[str, dict[str, Any]], note: str = "") -> list[str]:
        """An assistant message making ``calls``, then their results; the outputs."""
        made = []
        for name, arguments in calls:
            self.calls += 1
            made.append(Call(f"toolu_{self.calls:05d}", name, arguments))
        self.steps.append(Step("assistant", text, tuple(made)))
        outputs = [self.shell.answer(c) for c in made]
        self.steps.append(
            Step("results", results=tuple((c.id, o) for c, o in zip(made, outputs, strict=True)), note=note)
        )
        return outputs

    def say(self, text: str) -> None:
        self.steps.append(Step("assistant", text))


def _modules(shell: Shell) -> list[str]:
    listed = shell.run(["git", "ls-tree", "-r", "--name-only", ANCHOR, "--", "ctxproxy"]).splitlines()
    return [p for p in listed if p.endswith(".py") and not p.endswith("__init__.py")]


def _test_file(shell: Shell, module: str) -> str | None:
    parts = Path(module).with_suffix("").parts[1:]
    candidates = [f"tests/{'/'.join(parts[:-1])}/test_{parts[-1]}.py".replace("//", "/"), f"tests/test_{parts[-1]}.py"]
    tracked = set(shell.run(["git", "ls-tree", "-r", "--name-only", ANCHOR, "--", "tests"]).splitlines())
    return next((c for c in candidates if c in tracked), None)


def _task(script: Script, i: int, module: str) -> None:
    """One request of the user's, worked through with 5 to 9 tool calls."""
    dotted = module.removesuffix(".py").replace("/", ".")
    script.user(
        f"Look at {module}: what does it do, who uses it, and do its tests pass? Then say what you would change."
    )
    [defs] = script.act(
        "I'll list what it defines first.", ("grep", {"pattern": r"^(async def|def|class) ", "paths": [module]})
    )
    names = re.findall(r"(?:def|class) (\w+)", defs)
    script.act("Now the module itself.", ("read_file", {"path": module}))
    users_call = ("grep", {"pattern": re.escape(dotted) + r"\b", "paths": ["ctxproxy", "tests"]})
    history_call = ("bash", {"command": f"git log --stat -n 4 {ANCHOR} -- {module}"})
    note = "(while that runs: keep an eye on anything that writes to the store)" if i % 6 == 5 else ""
    if i % 2:
        users, history = script.act("Who imports it, and how it changed lately.", users_call, history_call, note=note)
    else:
        [users] = script.act("Who imports it?", users_call, note=note)
        [history] = script.act("And its recent history.", history_call)
    test = _test_file(script.shell, module)
    if test is not None:
        script.act("Its tests.", ("read_file", {"path": test}))
    outcome = "not run"
    if test is not None and i % 3 == 0:
        [ran] = script.act("Running them.", ("bash", {"command": f"pytest -q -p no:cacheprovider {test}"}))
        outcome = next((line for line in reversed(ran.splitlines()) if " passed" in line or " failed" in line), "?")
    if i % 4 == 1:
        script.act(
            "What changed in it over the last 30 commits.",
            ("bash", {"command": f"git diff {ANCHOR}~30 {ANCHOR} -- {module}"}),
        )
    source = script.shell.run(["git", "show", f"{ANCHOR}:{module}"])
    imported = [d for d in DEPENDENCIES if re.search(rf"^(import|from) {d}\b", source, re.M)]
    if imported and i % 5 == 2:
        script.act(f"Which {imported[0]} this venv has.", ("bash", {"command": f"pip show -f {imported[0]}"}))
    if i % 7 == 3:
        script.act("And the installed packages overall.", ("bash", {"command": "pip list --format json"}))
    importers = len({line.split(":", 1)[0] for line in users.splitlines() if ":" in line})
    last = next((line.strip() for line in history.splitlines()[4:6] if line.strip()), "no history")
    script.say(
        f"{module} defines {len(names)} names ({', '.join(names[:6]) or 'none'}{' …' if len(names) > 6 else ''}); "
        f"{importers} files import it. Last change: {last}. Tests: {outcome}. I would keep it as it is unless "
        "the callers above need more from it; nothing in it writes to the store directly."
    )


def build(tasks: int, shell: Shell | None = None) -> Session:
    """The session: ``tasks`` user requests, one per module (every k-th module of ``ANCHOR``)."""
    shell = shell or Shell()
    modules = _modules(shell)
    stride = max(1, len(modules) // max(tasks, 1))
    script = Script(shell)
    for i, module in enumerate(modules[::stride][:tasks]):
        _task(script, i, module)
    return Session(tuple(script.steps), len(shell.done))


# --- the two protocols ----------------------------------------------------------------------------


def chat_tools() -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["schema"]},
        }
        for t in TOOLS
    ]


def chat_messages(session: Session) -> list[dict[str, Any]]:
    """OpenAI chat: a system message, assistant ``tool_calls``, one ``tool`` message per result
    (a note the user typed meanwhile is a user message after them)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": f"{SYSTEM}\n{CLIENTS['chat']}"}]
    for step in session.steps:
        if step.role == "user":
            out.append({"role": "user", "content": step.text})
        elif step.role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": step.text}
            if step.calls:
                message["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                    for c in step.calls
                ]
            out.append(message)
        else:
            out.extend({"role": "tool", "tool_call_id": cid, "content": output} for cid, output in step.results)
            if step.note:
                out.append({"role": "user", "content": step.note})
    return out


def messages_tools() -> list[dict[str, Any]]:
    return [{"name": t["name"], "description": t["description"], "input_schema": t["schema"]} for t in TOOLS]


def messages_system() -> list[dict[str, Any]]:
    return [{"type": "text", "text": f"{SYSTEM}\n{CLIENTS['messages']}", "cache_control": {"type": "ephemeral"}}]


def messages_messages(session: Session) -> list[dict[str, Any]]:
    """Anthropic Messages: ``tool_use`` blocks in the assistant's message, the results as
    ``tool_result`` blocks opening the next user message (a note the user typed meanwhile is a
    text block after them, in the same message)."""
    out: list[dict[str, Any]] = []
    for step in session.steps:
        if step.role == "user":
            out.append({"role": "user", "content": [{"type": "text", "text": step.text}]})
        elif step.role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": step.text}]
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in step.calls]
            out.append({"role": "assistant", "content": blocks})
        else:
            blocks = [{"type": "tool_result", "tool_use_id": cid, "content": output} for cid, output in step.results]
            if step.note:
                blocks.append({"type": "text", "text": step.note})
            out.append({"role": "user", "content": blocks})
    return out

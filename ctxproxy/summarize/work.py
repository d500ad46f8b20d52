"""The work a range of an agent conversation did, read from its tool calls. Pure.

Read from canonical messages whose scaffolding is already gone
(``ctxproxy.summarize.scaffolding``):

- **requests**: the user messages that started a turn in which the assistant called tools — in an
  agent session, what the user asked for; a chat without tools has none, and is summarised by
  its sentences alone.
- **files** read and modified, in order: ``ctxproxy.strategies.file_ops`` (file tools by name,
  shell command lines by their words, patch envelopes). A file that was modified is listed only
  as modified.
- **commands**: every call that runs a shell command line (``command_line``: Claude Code's
  ``Bash``, Codex's ``shell`` / ``exec_command``) and is not a file tool, with the outcome of the
  tool result that answers it (by ``tool_call_id``; ``None`` when that result is not in the
  range): its exit code (``Exit code: 1``, ``Process exited with code 1``, Claude Code's
  ``Exit code 1``, a ``{"output", "metadata": {"exit_code"}}`` object), its first meaningful
  line (status lines such as ``Wall time: …`` and ``Output:`` skipped), and whether it failed:
  an exit code other than 0, or the result flagged ``is_error`` — on the message, or on the
  original block its wire adapter keeps with it.
- **errors**: the results of other calls that are flagged as errors or whose first meaningful
  line is an error (``Error: …``, ``ValueError: …``, ``error[E0308]: …``, ``fatal: …``,
  ``Traceback (most recent call last):``), as ``<tool>: <line>``.

The files of a call that failed are not listed. ``covered`` names the calls these items tell of
(commands, errors, file reads and edits): a summariser need not read their results again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ctxproxy.strategies.file_ops import call_file_ops, classify_call, tool_calls
from ctxproxy.strategies.shell_files import command_line
from ctxproxy.summarize.transcript import content_text
from ctxproxy.vocabulary import RESULT_ROLES, ROLE_ASSISTANT, ROLE_USER

__all__ = ["CommandRun", "Outcome", "ToolError", "Work", "find_work", "merged_files"]

ERROR_FLAG: Final = "is_error"
STATUS_CHARS: Final = 400  # where the status lines of a result are (exit code, wall time)
SCAN_CHARS: Final = 20_000  # how much of a result is searched for its first meaningful or error line
_EXIT_CODE: Final = re.compile(r"^\s*(?:exit code|exit status|process exited with code)[:\s]\s*(-?\d+)", re.I | re.M)
_STATUS_LINE: Final = re.compile(
    r"^(?:(?:exit code|exit status|wall time|chunk id|original token count|total output lines"
    r"|process exited with code|process running with session id)\b|output:?\s*$)",
    re.I,
)
# An error line, also as pytest shows one ("E   ValueError: …", "FAILED tests/…").
_ERROR_LINE: Final = re.compile(
    r"^(?-i:E\s+)?(?:(?:error|fatal|failed|exception)\b|traceback \(most recent call last\)"
    r"|[\w.]*(?:error|exception)(?:\[\w+\])?:)",
    re.I,
)
_WRAPPED: Final = re.compile(r"^<([\w-]+)>(.*)</\1>$", re.S)


@dataclass(frozen=True)
class Outcome:
    line: str  # the first meaningful line of the result ("" when it has none)
    exit_code: int | None
    failed: bool


@dataclass(frozen=True)
class CommandRun:
    command: str
    outcome: Outcome | None  # None: the result is not in the range
    call_id: str | None = None


@dataclass(frozen=True)
class ToolError:
    tool: str
    line: str
    call_id: str | None = None

    def render(self) -> str:
        return f"{self.tool}: {self.line}"


@dataclass(frozen=True)
class Work:
    requests: tuple[str, ...] = ()  # the user's text of each request, in order
    files_read: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    commands: tuple[CommandRun, ...] = ()
    errors: tuple[ToolError, ...] = ()
    covered: frozenset[str] = frozenset()  # the calls (ids) that the items above already tell of


def _flagged(message: Mapping[str, Any]) -> bool:
    """The result says it is an error: ``is_error`` on the message or on a block kept with it."""
    if message.get(ERROR_FLAG) is True:
        return True
    return any(isinstance(value, Mapping) and value.get(ERROR_FLAG) is True for value in message.values())


def _output(text: str) -> tuple[str, int | None]:
    """A result's output and its exit code, from a JSON ``output`` / ``metadata`` object or the
    status lines at the top of a text."""
    if text.startswith("{") and '"output"' in text:
        try:
            decoded = json.loads(text)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
            metadata = decoded.get("metadata")
            code = metadata.get("exit_code") if isinstance(metadata, dict) else None
            return decoded["output"], code if isinstance(code, int) and not isinstance(code, bool) else None
    found = _EXIT_CODE.search(text[:STATUS_CHARS])
    return text, int(found.group(1)) if found else None


def _lines(text: str) -> Iterator[str]:
    """The meaningful lines of the first ``SCAN_CHARS`` of an output, whitespace collapsed."""
    for raw in text[:SCAN_CHARS].splitlines():
        line = " ".join(raw.split())
        if line and not _STATUS_LINE.match(line):
            wrapped = _WRAPPED.match(line)
            if line := wrapped.group(2).strip() if wrapped else line:
                yield line


def outcome(message: Mapping[str, Any]) -> Outcome:
    """What a tool result says about how its call went."""
    output, code = _output(content_text(message.get("content")))
    failed = _flagged(message) or (code is not None and code != 0)
    first, error = None, None
    for line in _lines(output):
        first = first or line
        if not failed or _ERROR_LINE.match(line):
            error = line if failed else None
            break
    return Outcome(error or first or "", code, failed)


def _requests(messages: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    requests: list[str] = []
    current: str | None = None
    for message in messages:
        if message.get("role") == ROLE_USER:
            current = content_text(message.get("content")).strip() or None
        elif current is not None and message.get("role") == ROLE_ASSISTANT and message.get("tool_calls"):
            requests.append(current)
            current = None
    return tuple(requests)


def find_work(messages: Sequence[Mapping[str, Any]]) -> Work:
    """The requests, files, commands and errors of ``messages`` (see the module docstring)."""
    messages = [m for m in messages if isinstance(m, Mapping)]
    results = {m.get("tool_call_id"): m for m in messages if m.get("role") in RESULT_ROLES}
    ops: dict[tuple[str, str], None] = {}
    commands: list[CommandRun] = []
    errors: list[ToolError] = []
    covered: set[str] = set()
    for message in messages:
        for call in tool_calls(message):
            result = results.get(call.id) if call.id is not None else None
            said = outcome(result) if result is not None else None
            line = command_line(call.arguments) if classify_call(call) is None else None
            files = call_file_ops(call)
            failed = said is not None and (said.failed or (line is None and bool(_ERROR_LINE.match(said.line))))
            if line is not None:
                commands.append(CommandRun(line, said, call.id))
            elif failed and said is not None and said.line:
                errors.append(ToolError(call.name, said.line, call.id))
            elif not files:
                continue  # a call the work does not tell of: its result is read as text
            if not failed:  # a failed call read or changed nothing
                ops.update(dict.fromkeys(files))
            if call.id is not None:
                covered.add(call.id)
    read, modified = merged_files(([path for op, path in ops if op == "read"], [p for o, p in ops if o == "modified"]))
    return Work(_requests(messages), tuple(read), tuple(modified), tuple(commands), tuple(errors), frozenset(covered))


def merged_files(*lists: tuple[Iterable[str], Iterable[str]]) -> tuple[list[str], list[str]]:
    """The union of ``(read, modified)`` file lists, in first-seen order; a file modified in any of
    them is listed only as modified."""
    modified = list(dict.fromkeys(name for _, names in lists for name in names if name))
    changed = set(modified)
    read = list(dict.fromkeys(name for names, _ in lists for name in names if name and name not in changed))
    return read, modified

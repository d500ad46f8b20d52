"""The work of an agent range: requests, files, commands with their outcomes, errors (summarize/work.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxproxy.summarize.scaffolding import strip_scaffolding
from ctxproxy.summarize.work import CommandRun, Outcome, ToolError, find_work, merged_files
from tests.summarize.agent_sessions import (
    CODEX_REQUEST,
    CODEX_SECOND_REQUEST,
    REQUEST,
    SECOND_REQUEST,
    claude_code_session,
    codex_session,
)
from tests.summarize.factories import assistant, tool, user


def bash(command: str) -> tuple[str, str]:
    return "Bash", json.dumps({"command": command})


def test_claude_code_session() -> None:
    work = find_work(strip_scaffolding(claude_code_session()))
    assert work.requests == (REQUEST, SECOND_REQUEST)
    assert work.commands == (CommandRun("grep -c ERROR a.log", Outcome("42", None, False), "toolu_1"),)
    assert work.errors == (ToolError("Read", "File does not exist.", "toolu_3"),)  # is_error on the kept block
    assert (work.files_read, work.files_modified) == (("a.log",), ("/work/logs/count.py",))  # count.py: read, edited
    assert work.covered == {"toolu_1", "toolu_2", "toolu_3", "toolu_4"}


def test_codex_session() -> None:
    work = find_work(strip_scaffolding(codex_session()))
    assert work.requests == (CODEX_REQUEST, CODEX_SECOND_REQUEST)
    assert [(run.command, run.outcome) for run in work.commands] == [
        ("grep -c ERROR a.log", Outcome("3", 0, False)),  # "Process exited with code 0 … Output:"
        ("sed -n '1,40p' src/app.py", Outcome("def answer():", 0, False)),  # an {"output", "metadata"} object
        ("pytest -q tests/test_app.py", Outcome("E AssertionError: assert 1 == 2", 1, True)),  # its error line
    ]
    assert work.errors == ()
    assert (work.files_read, work.files_modified) == (("a.log",), ("src/app.py",))


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (
            "Exit code 2\nls: cannot access 'x': No such file or directory",
            Outcome("ls: cannot access 'x': No such file or directory", 2, True),
        ),
        ("Exit code: 0\nWall time: 0.2 seconds\nOutput:\nok", Outcome("ok", 0, False)),
        (
            "Process exited with code 1\nOutput:\nTraceback (most recent call last):\n  x\nValueError: bad",
            Outcome("Traceback (most recent call last):", 1, True),
        ),
        ('{"output": "", "metadata": {"exit_code": 0, "duration_seconds": 0.1}}', Outcome("", 0, False)),
        ('{"output": "boom", "metadata": {"exit_code": true}}', Outcome("boom", None, False)),
        ("\n\n   \n", Outcome("", None, False)),
        ("done\n" + "x\n" * 300 + "exit code: 3", Outcome("done", None, False)),  # not a status line at the top
    ],
)
def test_outcomes(result: str, expected: Outcome) -> None:
    [run] = find_work([assistant(None, bash("do it")), tool(result)]).commands
    assert run.outcome == expected


def test_an_error_flag_on_the_message_fails_a_command_without_an_exit_code() -> None:
    [run] = find_work([assistant(None, bash("npm test")), {**tool("Killed"), "is_error": True}]).commands
    assert run.outcome == Outcome("Killed", None, True)


def test_requests_are_the_user_turns_that_used_tools() -> None:
    messages = [
        user("Hi there"),
        assistant("Hello! How can I help?"),
        user("List the files, please."),
        assistant(None, bash("ls")),
        tool("a.py"),
        assistant("There is a.py."),
    ]
    assert find_work(messages).requests == ("List the files, please.",)
    assert find_work([user("Hi"), assistant("Hello")]).requests == ()


def calls(*pairs: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """An assistant message calling ``(id, tool, arguments)`` for each pair."""
    made = [{"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in pairs]
    return {"role": "assistant", "content": None, "tool_calls": made}


def test_errors_of_other_tools_and_the_files_of_failed_calls() -> None:
    messages: list[dict[str, Any]] = [
        calls(("c1", "read_file", {"path": "gone.py"}), ("c2", "fetch_url", {"url": "https://x"})),
        tool("Error: ENOENT: no such file or directory", "c1"),
        tool("Timeout while fetching https://x", "c2"),  # no error line, no flag: read as text
        calls(("c3", "write_file", {"path": "ok.py"}), ("c4", "Bash", {"command": "rm build.log"})),
        tool("written", "c3"),
        tool("Exit code 1\nrm: build.log: Permission denied", "c4"),
    ]
    work = find_work(messages)
    assert work.errors == (ToolError("read_file", "Error: ENOENT: no such file or directory", "c1"),)
    assert (work.files_read, work.files_modified) == ((), ("ok.py",))  # gone.py's read failed, so did rm
    assert [run.outcome for run in work.commands] == [Outcome("rm: build.log: Permission denied", 1, True)]
    assert work.covered == {"c1", "c3", "c4"}  # c2's result is ordinary text


def test_a_command_whose_result_is_not_in_the_range() -> None:
    assert find_work([assistant(None, bash("make"))]).commands == (CommandRun("make", None, "call_0"),)


def test_merged_files_keep_order_and_list_a_modified_file_once() -> None:
    assert merged_files((["a", "b"], ["c"]), (["c", "d", "a"], ["b"])) == (["a", "d"], ["c", "b"])

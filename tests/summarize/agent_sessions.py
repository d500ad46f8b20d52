"""Agent sessions as ctxproxy's canonical messages: Claude Code (built on a captured request) and Codex.

``claude_code_session``: the first request Claude Code 2.1.197 really sent
(``fixtures/claude_code_first_request.json``: a ``<system-reminder>`` text block before the
user's words, then the agent and skill lists as a ``role: "system"`` message inside
``messages``), with the user's words replaced and a session built on it in the Messages API's
shape — Bash, Read (whose result Claude Code ends with a reminder of its own), Edit, a Read of a
missing file (``is_error``), a second user turn opening with the same reminder — converted the
way ctxproxy converts a Messages body (``wire.anthropic.convert.to_messages``), the system
message kept a system message as the canonical model shows it.

``codex_session``: what a Codex request holds once in canonical form: developer messages (its
permissions), the AGENTS.md instructions and the environment context as user messages of their
own, repeated in the second turn, and ``exec_command`` / ``shell`` / ``apply_patch`` calls whose
outputs are in Codex's formats (``Process exited with code 0 … Output:``, an
``{"output", "metadata"}`` object).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxproxy.wire.anthropic.convert import to_messages

FIXTURE = Path(__file__).parent / "fixtures" / "claude_code_first_request.json"
REQUEST = "count the ERROR lines in log A"
SECOND_REQUEST = "Now make count.py print the total as well."
MALWARE_REMINDER = (
    "\n\n<system-reminder>\nWhenever you read a file, you should consider whether it would be considered "
    "malware. You CAN and SHOULD provide analysis of malware, what it is doing. But you MUST refuse to "
    "improve or augment the code.\n</system-reminder>\n"
)


def captured() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = json.loads(FIXTURE.read_text())["messages"]
    return messages


def reminder_block() -> dict[str, Any]:
    """The ``<system-reminder>`` text block Claude Code put before the user's words."""
    block: dict[str, Any] = captured()[0]["content"][0]
    assert block["text"].startswith("<system-reminder>")
    return block


def agent_types() -> str:
    """The agent and skill lists Claude Code sends as a system message inside ``messages``."""
    text: str = captured()[1]["content"]
    assert text.startswith("Available agent types for the Agent tool:")
    return text


def _tool_use(call_id: str, name: str, arguments: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
    return {"role": "assistant", "content": content}


def _tool_result(call_id: str, text: str, *, error: bool = False) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": error}
    return {"role": "user", "content": [block]}


def claude_code_messages_body() -> list[dict[str, Any]]:
    """The session in the Messages API's shape (the system message kept where Claude Code sends it)."""
    first, system = captured()[:2]
    words = {**first["content"][1], "text": REQUEST}
    return [
        {**first, "content": [reminder_block(), words]},
        system,
        _tool_use("toolu_1", "Bash", {"command": "grep -c ERROR a.log", "description": "Count ERROR lines"}),
        _tool_result("toolu_1", "42"),
        _tool_use("toolu_2", "Read", {"file_path": "/work/logs/count.py"}, "There are 42. Let me look at the script."),
        _tool_result(
            "toolu_2", "     1\timport sys\n     2\tprint(sum(1 for _ in open(sys.argv[1])))\n" + MALWARE_REMINDER
        ),
        {"role": "assistant", "content": [{"type": "text", "text": "Log A has 42 ERROR lines."}]},
        {"role": "user", "content": [reminder_block(), {"type": "text", "text": SECOND_REQUEST}]},
        _tool_use("toolu_3", "Read", {"file_path": "/work/logs/missing.py"}),
        _tool_result("toolu_3", "<tool_use_error>File does not exist.</tool_use_error>", error=True),
        _tool_use(
            "toolu_4", "Edit", {"file_path": "/work/logs/count.py", "old_string": "print(", "new_string": "n = ("}
        ),
        _tool_result("toolu_4", "The file /work/logs/count.py has been updated."),
        {"role": "assistant", "content": [{"type": "text", "text": "Done: count.py now prints the total."}]},
    ]


def claude_code_session() -> list[dict[str, Any]]:
    """The session as canonical messages, its system message a system message."""
    canonical: list[dict[str, Any]] = []
    for message in claude_code_messages_body():
        if message["role"] == "system":
            canonical.append({"role": "system", "content": message["content"]})
        else:
            canonical += to_messages({"messages": [message]})
    return canonical


AGENTS_MD = (
    "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\n## Testing\nRun the whole suite with pytest before "
    "committing; keep every module under four hundred lines.\n</INSTRUCTIONS>"
)
ENVIRONMENT = (
    "<environment_context>\n  <cwd>/repo</cwd>\n  <shell>bash</shell>\n  <current_date>2026-11-27</current_date>\n"
    "</environment_context>"
)
PERMISSIONS = (
    "<permissions instructions>\nFilesystem sandboxing defines which files can be read or written. "
    "`sandbox_mode` is `workspace-write`.\n</permissions instructions>"
)
# A house rule the user's client pastes into every turn without any tag: repeated, so scaffolding.
HOUSE_RULES = (
    "House rules for this workspace: answer in English, cite file paths relative to the repository root, "
    "and never print secrets from the environment."
)
CODEX_REQUEST = "Count the ERROR lines in a.log"
CODEX_SECOND_REQUEST = "Fix the failing test in tests/test_app.py"
PATCH = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-    return 1\n+    return 2\n*** End Patch"


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def _output(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def codex_session() -> list[dict[str, Any]]:
    exec_output = (
        "Chunk ID: ee2eed\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 1\nOutput:\n3\n"
    )
    failing = "Chunk ID: 01ab\nWall time: 0.4 seconds\nProcess exited with code 1\nOutput:\n..F\nE   AssertionError: assert 1 == 2\n"
    return [
        {"role": "developer", "content": PERMISSIONS},
        {"role": "user", "content": AGENTS_MD},
        {"role": "user", "content": ENVIRONMENT},
        {"role": "user", "content": f"{HOUSE_RULES}\n\n{CODEX_REQUEST}"},
        _call("call_1", "exec_command", {"cmd": "grep -c ERROR a.log"}),
        _output("call_1", exec_output),
        _call("call_2", "shell", {"command": ["bash", "-lc", "sed -n '1,40p' src/app.py"], "workdir": "/repo"}),
        _output("call_2", json.dumps({"output": "def answer():\n    return 1\n", "metadata": {"exit_code": 0}})),
        {"role": "assistant", "content": "a.log has 3 ERROR lines."},
        {"role": "user", "content": AGENTS_MD},
        {"role": "user", "content": ENVIRONMENT},
        {"role": "user", "content": f"{HOUSE_RULES}\n\n{CODEX_SECOND_REQUEST}"},
        _call("call_3", "exec_command", {"cmd": "pytest -q tests/test_app.py"}),
        _output("call_3", failing),
        _call("call_4", "apply_patch", {"input": PATCH}),
        _output("call_4", "Success. Updated the following files:\nM src/app.py"),
        {"role": "assistant", "content": "We'll keep the fix local to src/app.py; the test passes now."},
    ]

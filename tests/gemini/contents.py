"""Tiny factories of Gemini contents: an agent conversation with thoughts, thought signatures,
parallel function calls and their responses, some parts in snake_case as the SDK writes them."""

from __future__ import annotations

from typing import Any

SYSTEM = {"parts": [{"text": "You are a careful agent. Keep answers short."}]}
TOOLS = [{"functionDeclarations": [{"name": "read_log", "description": "Read a log file.",
                                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]}]  # fmt: skip
FILLER = "The nightly job wrote a long report about disks, queues and the retry backlog. " * 4


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def agent_turns(n: int) -> list[dict[str, Any]]:
    """``n`` rounds: a question, a model turn thinking and calling ``read_log`` twice at once
    (the first call signed), the two responses in one user content, and the model's answer."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        calls = [
            {
                "functionCall": {"name": "read_log", "args": {"path": f"/var/log/a{i}.log"}},
                "thoughtSignature": f"c2ln{i}",
            },
            {"function_call": {"name": "read_log", "args": {"path": f"/var/log/b{i}.log"}}},
        ]
        thought = {"text": f"I should read both logs of night {i}.", "thought": True}
        responses = [
            {"functionResponse": {"name": "read_log", "response": {"output": f"a{i}: {FILLER}"}}},
            {"function_response": {"name": "read_log", "response": {"output": f"b{i}: {FILLER}"}}},
        ]
        out += [
            user(f"Question {i}: what happened on night {i}?"),
            {"role": "model", "parts": [thought, *calls]},
            {"role": "user", "parts": responses},
            {"role": "model", "parts": [{"text": f"Night {i}: the queues backed up.", "thoughtSignature": f"dGV4{i}"}]},
        ]
    return out


def body(contents: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"contents": contents, "systemInstruction": SYSTEM, "tools": TOOLS, **extra}

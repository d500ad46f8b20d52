"""Tiny factories of Responses input items, as Codex and the SDK send them."""

from __future__ import annotations

from typing import Any

from tests.fakes.responses_wire import encrypted_reasoning


def developer(text: str, n: int = 0) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_dev{n}",
        "role": "developer",
        "content": [{"type": "input_text", "text": text}],
    }


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def said(text: str, n: int = 0) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": []}
    return {"type": "message", "id": f"msg_{n}", "status": "completed", "role": "assistant", "content": [part]}


def reasoning(n: int = 0) -> dict[str, Any]:
    item_id = f"rs_fake{n:04d}_0"
    summary = [{"type": "summary_text", "text": f"thinking {n}"}]
    return {"type": "reasoning", "id": item_id, "summary": summary, "encrypted_content": encrypted_reasoning(item_id)}


def call(call_id: str, name: str = "exec_command", arguments: str = '{"cmd": "ls"}') -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{call_id}", "status": "completed", "call_id": call_id, "name": name,
            "arguments": arguments}  # fmt: skip


def output(call_id: str, text: str = "a.log\nb.log\n") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def codex_turns(n: int) -> list[dict[str, Any]]:
    """``n`` Codex-like turns: a user ask, reasoning, a shell call and its output, reasoning, an answer."""
    items: list[dict[str, Any]] = []
    for k in range(1, n + 1):
        cid = f"call_{k:03d}"
        items += [user(f"Task {k}: count the ERROR lines in log {k} and tell me which file had the most.")]
        items += [reasoning(2 * k), call(cid, arguments=f'{{"cmd": "grep -c ERROR log{k}.txt"}}')]
        items += [
            output(cid, f"log{k}.txt: {k * 3} errors\n" * 8),
            reasoning(2 * k + 1),
            said(f"Log {k} has {k * 3}.", k),
        ]
    return items

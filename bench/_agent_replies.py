"""What the agent CLIs' fake model says, and how each API writes it (pure, no I/O).

The model is scripted by the conversation itself, not by the order of requests, so side requests a
CLI makes (titles, quota checks, warm-ups) get a plain answer and do not shift the script:

* when the newest user turn's last text asks about :data:`TOOL_FILE` and the request offers a
  shell tool: a call of that tool running the first of :data:`COMMANDS`;
* when the newest user turn is a tool's result (``tool_result`` / ``function_call_output``): a
  call running the next of :data:`COMMANDS` (the one after the command that result answers), and
  after the last one the final text, quoting its output;
* a Responses request whose last input item is a ``compaction_trigger`` (Codex's remote compaction
  with OpenAI's own provider): one ``compaction`` output item with opaque ``encrypted_content``
  (when ctxproxy serves the compaction itself, this fake never sees the trigger);
* a Responses turn after a compaction (a ``compaction`` item after the newest user message, or
  that user message being ctxproxy's expansion of its own item): text saying so;
* else: a short text.

Anthropic Messages (https://docs.claude.com/en/docs/build-with-claude/streaming): a Message object,
or ``message_start``, per block ``content_block_start`` / ``*_delta`` / ``content_block_stop``,
``message_delta`` (stop reason, usage), ``message_stop``. OpenAI Responses
(https://platform.openai.com/docs/api-reference/responses-streaming): ``response.created``,
``response.in_progress``, per output item ``response.output_item.added``, its part or argument
deltas and ``*.done`` events, ``response.output_item.done``, then ``response.completed`` carrying
the whole response with ``usage``; every event has a ``sequence_number``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, replace
from typing import Any

from ctxproxy.wire.openai_responses.expand import INTRO as SUMMARY_INTRO

TOOL_FILE = "a.log"
COMMANDS = ("grep ERROR a.log", "grep WARN a.log")  # a task's calls, one after the other
SHELL_TOOLS = ("Bash", "exec_command", "shell_command", "shell")  # the first one a request offers is called


@dataclass(frozen=True)
class Said:
    """One answer: its text, or the shell tool it calls (``tool``, with ``arguments``), or a
    compaction item."""

    text: str = ""
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    call_id: str = ""
    compaction: bool = False
    prompt_tokens: int = 0  # the usage reported: a token per 4 characters of the request body


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


def _said_last(content: Any) -> str:
    """What the user said last in a turn: its last text part (what a proxy merged in before it,
    a summary or memories, does not count)."""
    if isinstance(content, str):
        return content
    texts = [p for p in content if isinstance(p, dict) and "text" in p] if isinstance(content, list) else []
    return str(texts[-1]["text"]) if texts else ""


def _shell_arguments(tool: dict[str, Any], command: str) -> dict[str, Any]:
    """Arguments running ``command`` in the shape the tool's schema asks for."""
    schema = tool.get("input_schema") or tool.get("parameters") or {}
    properties = schema.get("properties") or {}
    for name in ("command", "cmd"):
        if name in properties:
            kind = properties[name].get("type")
            return {name: ["bash", "-lc", command] if kind == "array" else command}
    return {"command": command}


def _command_of(arguments: Any) -> str:
    """The command a shell call ran (from its arguments, a JSON text for Responses)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return ""
    found = arguments.get("command", arguments.get("cmd", "")) if isinstance(arguments, dict) else ""
    return " ".join(found) if isinstance(found, list) else str(found)


def _script(newest: str, answered: tuple[str, str] | None, tools: list[dict[str, Any]], call_id: str) -> Said:
    """``answered``: (the command, its output) when the newest turn is a tool's result."""
    by_name = {str(t.get("name")): t for t in tools if isinstance(t, dict)}
    shell = next((name for name in SHELL_TOOLS if name in by_name), None)
    if answered is not None:
        done = [i for i, command in enumerate(COMMANDS) if command in answered[0]]
        step = done[0] + 1 if done else len(COMMANDS)
        if step < len(COMMANDS) and shell is not None:
            return Said(tool=shell, arguments=_shell_arguments(by_name[shell], COMMANDS[step]), call_id=call_id)
        return Said(text=f"The command printed: {answered[1].strip()[:200]}")
    if TOOL_FILE in newest and shell is not None:
        return Said(tool=shell, arguments=_shell_arguments(by_name[shell], COMMANDS[0]), call_id=call_id)
    return Said(text="Hi! This is the fake upstream answering.")


def _prompt_tokens(payload: dict[str, Any]) -> int:
    return len(json.dumps(payload, ensure_ascii=False)) // 4


def messages_said(payload: dict[str, Any], number: int) -> Said:
    """The answer to a Messages request (its newest ``user`` message decides)."""
    return replace(_messages_said(payload, number), prompt_tokens=_prompt_tokens(payload))


def responses_said(payload: dict[str, Any], number: int) -> Said:
    """The answer to a Responses request (its newest user message and what follows it decide; a
    ``compaction`` item after it stands for the work already done)."""
    return replace(_responses_said(payload, number), prompt_tokens=_prompt_tokens(payload))


def _messages_said(payload: dict[str, Any], number: int) -> Said:
    messages = [m for m in payload.get("messages") or [] if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    blocks = content if isinstance(content, list) else []
    results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
    answered = None
    if results:
        uses = [
            b for m in messages for b in m.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        command = next((_command_of(b.get("input")) for b in uses if b.get("id") == results[-1].get("tool_use_id")), "")
        answered = (command, _text_of(results[-1].get("content")))
    tools = payload.get("tools") or []
    return _script(_said_last(content), answered, tools, f"toolu_fake{number:04d}")


def _responses_said(payload: dict[str, Any], number: int) -> Said:
    items = payload.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
    last = items[-1] if items else {}
    tools = [t for t in payload.get("tools") or [] if t.get("type") == "function"]
    if last.get("type") == "compaction_trigger":
        return Said(compaction=True)
    if last.get("type") in ("function_call_output", "custom_tool_call_output"):
        output = last.get("output")
        calls = [i for i in items if i.get("type") == "function_call" and i.get("call_id") == last.get("call_id")]
        command = _command_of(calls[-1].get("arguments")) if calls else ""
        said = output if isinstance(output, str) else json.dumps(output)
        return _script("", (command, said), tools, f"call_fake{number:04d}")
    users = [i for i, item in enumerate(items) if item.get("role") == "user"]
    newest = _said_last(items[users[-1]].get("content")) if users else ""
    compacted = any(item.get("type") == "compaction" for item in items[users[-1] if users else 0 :])
    if compacted or newest.startswith(SUMMARY_INTRO):  # a compaction item, or ctxproxy's expansion of its own
        return _script("", ("", "(see the compacted context)"), [], "")
    return _script(newest, None, tools, f"call_fake{number:04d}")


# --- Anthropic Messages ------------------------------------------------------------------------


def _message_blocks(said: Said) -> list[dict[str, Any]]:
    if said.tool is not None:
        return [{"type": "tool_use", "id": said.call_id, "name": said.tool, "input": said.arguments or {}}]
    return [{"type": "text", "text": said.text}]


def message_object(said: Said, model: str, number: int) -> dict[str, Any]:
    return {
        "id": f"msg_fake{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _message_blocks(said),
        "stop_reason": "tool_use" if said.tool else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": said.prompt_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 12,
        },
    }


def message_events(said: Said, model: str, number: int) -> list[tuple[str, dict[str, Any]]]:
    message = message_object(said, model, number)
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opening, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})
        )
        events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append(("message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 12}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# --- OpenAI Responses --------------------------------------------------------------------------


def _output_item(said: Said, number: int) -> dict[str, Any]:
    if said.compaction:
        opaque = base64.b64encode(f"fake compaction {number}".encode()).decode()
        return {"type": "compaction", "id": f"cmp_fake{number:04d}", "encrypted_content": opaque}
    if said.tool is not None:
        arguments = json.dumps(said.arguments or {})
        item_id = f"fc_fake{number:04d}"
        return {"type": "function_call", "id": item_id, "status": "completed", "call_id": said.call_id,
                "name": said.tool, "arguments": arguments}  # fmt: skip
    part = {"type": "output_text", "text": said.text, "annotations": []}
    return {"type": "message", "id": f"msg_fake{number:04d}", "status": "completed", "role": "assistant",
            "content": [part]}  # fmt: skip


def response_object(said: Said, model: str, number: int, *, done: bool = True) -> dict[str, Any]:
    usage = {"input_tokens": said.prompt_tokens, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 12,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": said.prompt_tokens + 12}  # fmt: skip
    return {
        "id": f"resp_fake{number:04d}",
        "object": "response",
        "created_at": 1_760_000_000 + number,
        "status": "completed" if done else "in_progress",
        "model": model,
        "output": [_output_item(said, number)] if done else [],
        "usage": usage if done else None,
        "error": None,
        "incomplete_details": None,
    }


def _item_events(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The events between an output item's ``added`` and its ``done``."""
    where = {"item_id": item["id"], "output_index": 0}
    if item["type"] == "compaction":
        return []
    if item["type"] == "function_call":
        return [
            {"type": "response.function_call_arguments.delta", **where, "delta": item["arguments"]},
            {"type": "response.function_call_arguments.done", **where, "arguments": item["arguments"]},
        ]
    part = item["content"][0]
    at = {**where, "content_index": 0}
    return [
        {"type": "response.content_part.added", **at, "part": {**part, "text": ""}},
        {"type": "response.output_text.delta", **at, "delta": part["text"], "logprobs": []},
        {"type": "response.output_text.done", **at, "text": part["text"], "logprobs": []},
        {"type": "response.content_part.done", **at, "part": part},
    ]


def response_events(said: Said, model: str, number: int) -> list[tuple[str, dict[str, Any]]]:
    opening = response_object(said, model, number, done=False)
    final = response_object(said, model, number)
    item = final["output"][0]
    adding = dict(item)
    if "status" in item:
        adding["status"] = "in_progress"
    if item["type"] == "function_call":
        adding["arguments"] = ""
    elif item["type"] == "message":
        adding["content"] = []
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": opening},
        {"type": "response.in_progress", "response": opening},
        {"type": "response.output_item.added", "output_index": 0, "item": adding},
        *_item_events(item),
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": final},
    ]
    return [(event["type"], {**event, "sequence_number": n}) for n, event in enumerate(events)]


def sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)

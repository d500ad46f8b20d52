"""A Messages body as ctxproxy's canonical messages (OpenAI chat shape), pure: the reading half of
``convert`` (whose docstring says what each key means and how ``render_body`` writes them back)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxproxy.vocabulary import ROLE_ASSISTANT, ROLE_SYSTEM, ROLE_TOOL, ROLE_USER
from ctxproxy.wire.anthropic.count import token_hint

__all__ = [
    "BLOCK_KEY",
    "INDEX_KEY",
    "IN_MESSAGES_KEY",
    "NEW_MESSAGE_KEY",
    "OPAQUE",
    "arguments_json",
    "canonical_content",
    "message_messages",
    "system_messages",
    "to_messages",
]

OPAQUE = "anthropic"  # the part type of a block ctxproxy does not interpret
BLOCK_KEY = "anthropic"
INDEX_KEY = "anthropic_index"
NEW_MESSAGE_KEY = "anthropic_new_message"
IN_MESSAGES_KEY = "anthropic_in_messages"
Message = dict[str, Any]


def to_messages(body: Mapping[str, Any]) -> list[Message]:
    """The body's ``system`` and ``messages`` as canonical messages (see the module)."""
    messages = body.get("messages") or ()
    return system_messages(body) + [m for i in range(len(messages)) for m in message_messages(messages, i)]


def system_messages(body: Mapping[str, Any]) -> list[Message]:
    """The body's ``system`` as canonical messages: one, or none."""
    system = body.get("system")
    return [{"role": ROLE_SYSTEM, "content": canonical_content(system)}] if system else []


def message_messages(messages: Sequence[Mapping[str, Any]], i: int) -> list[Message]:
    """The canonical messages ``messages[i]`` makes (``ctxproxy.wire.converted.ConvertOne``)."""
    message = messages[i]
    role = message.get("role")
    if role == ROLE_SYSTEM:
        converted = [
            {"role": ROLE_SYSTEM, "content": canonical_content(message.get("content")), IN_MESSAGES_KEY: message}
        ]
    else:
        converted = _assistant(message) if role == ROLE_ASSISTANT else _user(message)
    converted[0] = {**converted[0], NEW_MESSAGE_KEY: True}
    return converted


def _part(block: Mapping[str, Any]) -> dict[str, Any]:
    if block.get("type") == "text":
        return dict(block)
    return {"type": OPAQUE, "block": block, **token_hint(block)}


def canonical_content(content: Any) -> Any:
    if isinstance(content, list):
        return [_part(block) for block in content]
    return "" if content is None else content


def _user(message: Mapping[str, Any]) -> list[Message]:
    content = message.get("content")
    if not isinstance(content, list):
        return [{"role": ROLE_USER, "content": content}]
    out: list[Message] = [
        {
            "role": ROLE_TOOL,
            "tool_call_id": block.get("tool_use_id"),
            "content": canonical_content(block.get("content")),
            BLOCK_KEY: block,
        }
        for block in content
        if block.get("type") == "tool_result"
    ]
    rest = [_part(block) for block in content if block.get("type") != "tool_result"]
    if rest or not out:
        out.append({"role": ROLE_USER, "content": rest})
    return out


def _assistant(message: Mapping[str, Any]) -> list[Message]:
    content = message.get("content")
    if not isinstance(content, list):
        return [{"role": ROLE_ASSISTANT, "content": content}]
    trailing = len(content)
    while trailing and content[trailing - 1].get("type") == "tool_use":
        trailing -= 1
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        if block.get("type") != "tool_use":
            parts.append(_part(block))
            continue
        function = {"name": block.get("name"), "arguments": arguments_json(block.get("input"))}
        call = {"id": block.get("id"), "type": "function", "function": function, BLOCK_KEY: block}
        if j < trailing:
            call[INDEX_KEY] = j
        calls.append(call)
    converted: Message = {"role": ROLE_ASSISTANT, "content": parts}
    if calls:
        converted["tool_calls"] = calls
    return [converted]


def arguments_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

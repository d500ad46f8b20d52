"""Parsing and checking a chat completions body before anything is forwarded.

Only what ctxproxy relies on is checked: that the body is a JSON object, that ``messages`` is a
non-empty list of well-formed messages, and the types of ``model`` and ``stream``. Every other
field is left to the upstream and forwarded untouched. Each error names the offending
parameter (``messages[3].content``) and says what would be valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.errors import BadRequest

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_TEXT_ONLY_ROLES = ("system", "developer", "tool")


@dataclass(frozen=True)
class ChatRequest:
    body: dict[str, Any]
    raw: bytes
    messages: list[dict[str, Any]]
    model: str | None
    stream: bool
    user: str | None


def parse_chat_body(raw: bytes) -> ChatRequest:
    """Parse and check the whole body, every message included."""
    chat = parse_body(raw)
    check_messages(chat.messages)
    return chat


def parse_body(raw: bytes) -> ChatRequest:
    """Parse and check the body's own fields and that ``messages`` is a non-empty list; the
    messages themselves are checked by ``check_messages`` (so a known prefix can be skipped)."""
    if not raw.strip():
        raise BadRequest(
            "The request body is empty; send a JSON object with `model` and `messages`.", code="invalid_json"
        )
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"The request body is not valid JSON: {exc}.", code="invalid_json") from None
    if not isinstance(body, dict):
        raise BadRequest(f"The request body must be a JSON object, got {_kind(body)}.", code="invalid_body")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest(f"`model` must be a string, got {_kind(model)}.", param="model")
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise BadRequest(f"`stream` must be true or false, got {_kind(stream)}.", param="stream")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise BadRequest(f"`user` must be a string, got {_kind(user)}.", param="user")
    messages = _check_list(body.get("messages", _MISSING))
    return ChatRequest(body, raw, messages, model, bool(stream), user)


_MISSING: Any = object()


def check_messages(messages: list[dict[str, Any]], start: int = 0, end: int | None = None) -> None:
    """Check ``messages[start:end]``; raises BadRequest naming the first bad one."""
    stop = len(messages) if end is None else min(end, len(messages))
    for i in range(start, stop):
        _check_message(messages[i], f"messages[{i}]")


def _check_list(messages: Any) -> list[dict[str, Any]]:
    if messages is _MISSING:
        raise BadRequest("`messages` is required: a list of {role, content} objects.", param="messages")
    if not isinstance(messages, list):
        raise BadRequest(f"`messages` must be a list, got {_kind(messages)}.", param="messages")
    if not messages:
        raise BadRequest("`messages` must contain at least one message.", param="messages")
    return messages


def _check_message(message: Any, where: str) -> None:
    if not isinstance(message, dict):
        raise BadRequest(f"`{where}` must be an object with `role` and `content`, got {_kind(message)}.", param=where)
    role = message.get("role")
    if role not in ROLES:
        got = "missing" if role is None else repr(role)
        raise BadRequest(f"`{where}.role` must be one of {', '.join(ROLES)}; got {got}.", param=f"{where}.role")
    content = message.get("content")
    has_calls = bool(message.get("tool_calls") or message.get("function_call"))
    if content is None:
        if role == "assistant" and (has_calls or "refusal" in message or "audio" in message):
            pass
        elif role == "assistant":
            raise BadRequest(
                f"`{where}.content` is required unless the assistant message has `tool_calls`.",
                param=f"{where}.content",
            )
        else:
            raise BadRequest(f"`{where}.content` is required for a {role} message.", param=f"{where}.content")
    elif isinstance(content, list):
        _check_parts(content, f"{where}.content", text_only=role in _TEXT_ONLY_ROLES)
    elif not isinstance(content, str):
        raise BadRequest(
            f"`{where}.content` must be a string or a list of content parts, got {_kind(content)}.",
            param=f"{where}.content",
        )
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise BadRequest(
            f"`{where}.tool_call_id` is required for a tool message (a string).", param=f"{where}.tool_call_id"
        )
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise BadRequest(f"`{where}.name` must be a string, got {_kind(name)}.", param=f"{where}.name")
    if "tool_calls" in message and message["tool_calls"] is not None:
        _check_tool_calls(message["tool_calls"], f"{where}.tool_calls", role)


def _check_parts(parts: list[Any], where: str, *, text_only: bool) -> None:
    for j, part in enumerate(parts):
        here = f"{where}[{j}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise BadRequest(f'`{here}` must be an object with a string `type` (e.g. "text").', param=here)
        kind = part["type"]
        if kind == "text" and not isinstance(part.get("text"), str):
            raise BadRequest(f"`{here}.text` must be a string.", param=f"{here}.text")
        if text_only and kind != "text":
            raise BadRequest(f"`{here}` must be a text part in this message, got type {kind!r}.", param=here)
        if kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else None
            if not isinstance(url, str):
                raise BadRequest(f"`{here}.image_url.url` must be a string.", param=f"{here}.image_url.url")


def _check_tool_calls(calls: Any, where: str, role: str) -> None:
    if role != "assistant":
        raise BadRequest(f"`{where}` is only valid on assistant messages.", param=where)
    if not isinstance(calls, list):
        raise BadRequest(f"`{where}` must be a list, got {_kind(calls)}.", param=where)
    for k, call in enumerate(calls):
        here = f"{where}[{k}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not isinstance(function, dict):
            raise BadRequest(f"`{here}` must be an object with a string `id` and a `function` object.", param=here)
        if not isinstance(function.get("name"), str) or not isinstance(function.get("arguments"), str):
            raise BadRequest(
                f"`{here}.function` needs a string `name` and `arguments` (JSON encoded as a string).",
                param=f"{here}.function",
            )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)

"""Parsing and checking a chat completions body before anything is forwarded.

ctxproxy is never stricter than the upstream: a request the upstream would take is never refused.
Only a body that nothing can use is a 400 (``BadRequest``): not a JSON object, or ``messages``
missing, not a list or empty. What else is checked — that each message is one ctxproxy can model
(a known role, content of the API's types, well-formed tool calls) and that every other field
ctxproxy reads (``FIELDS``, the tools' names) has the type OpenAI's chat completions API gives
it — is what ctxproxy needs to compact safely: a request that fails it (``Uncompactable``,
naming the parameter, e.g. ``messages[3].content``) is forwarded as the client sent it, and the
upstream judges it. Every other field is left to the upstream and forwarded untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxproxy.errors import Uncompactable
from ctxproxy.pipeline.turn import Turn
from ctxproxy.vocabulary import ROLE_ASSISTANT, ROLE_DEVELOPER, ROLE_SYSTEM, ROLE_TOOL, ROLES, TOOL_KINDS
from ctxproxy.wire.incremental import BodyLoader
from ctxproxy.wire.json_body import MISSING, FieldTypes, check_field_types, load_object, require_messages
from ctxproxy.wire.json_body import json_kind as _kind

_TEXT_ONLY_ROLES = (ROLE_SYSTEM, ROLE_DEVELOPER, ROLE_TOOL)
# The roles whose message may be a role and a string content alone (a tool result needs its call's id).
_TEXT_ROLES = tuple(role for role in ROLES if role != ROLE_TOOL)
_NAME = (str, type(None))


def parse_chat_body(raw: bytes, load: BodyLoader | None = None) -> Turn:
    """Parse and check the whole body, every message included."""
    chat = parse_body(raw, load)
    check_messages(chat.messages)
    return chat


def parse_body(raw: bytes, load: BodyLoader | None = None) -> Turn:
    """Parse and check the body's own fields and that ``messages`` is a non-empty list; the
    messages themselves are checked by ``check_messages`` (so a known prefix can be skipped).
    ``load``: what parses the JSON (``ctxproxy.wire.incremental``: only what follows the previous
    body), ``load_object`` when not given."""
    needs = "`model` and `messages`"
    body = load_object(raw, needs=needs) if load is None else load(raw, needs)
    messages: list[dict[str, Any]] = require_messages(body.get("messages", MISSING))
    try:
        _check_fields(body)
    except Uncompactable as reason:
        model = body.get("model")
        return Turn(body, raw, [], model if isinstance(model, str) else None, body.get("stream") is True, None, reason)
    return Turn(body, raw, messages, body.get("model"), bool(body.get("stream")), body.get("user"))


# The body fields ctxproxy reads besides ``messages``, with their JSON types in the OpenAI API
# (``null`` always passes: it means "not sent"). The exact type: JSON true is not an integer.
FIELDS: FieldTypes = {
    "model": ((str,), "a string"),
    "user": ((str,), "a string"),
    "stream": ((bool,), "true or false"),
    "n": ((int,), "an integer"),
    "max_tokens": ((int,), "an integer"),
    "max_completion_tokens": ((int,), "an integer"),
    "tools": ((list,), 'a list of tool objects ({"type": "function", "function": {"name": …}})'),
    "functions": ((list,), 'a list of function objects ({"name": …})'),
    "tool_choice": ((str, dict), '"none", "auto", "required" or an object naming a tool'),
    "stream_options": ((dict,), 'an object such as {"include_usage": true}'),
}


def _check_fields(body: dict[str, Any]) -> None:
    check_field_types(body, FIELDS, Uncompactable)
    for i, tool in enumerate(body.get("tools") or ()):
        if not isinstance(tool, dict):
            raise Uncompactable(f"`tools[{i}]` must be a tool object, got {_kind(tool)}.", param=f"tools[{i}]")
        for kind in TOOL_KINDS:
            if tool.get(kind) is not None:
                _check_named(tool[kind], f"tools[{i}].{kind}")
    for i, function in enumerate(body.get("functions") or ()):
        _check_named(function, f"functions[{i}]")
    include_usage = (body.get("stream_options") or {}).get("include_usage")
    if include_usage is not None and not isinstance(include_usage, bool):
        raise Uncompactable(
            f"`stream_options.include_usage` must be true or false, got {_kind(include_usage)}.",
            param="stream_options.include_usage",
        )


def _check_named(spec: Any, where: str) -> None:
    if not isinstance(spec, dict):
        raise Uncompactable(f"`{where}` must be an object with a string `name`, got {_kind(spec)}.", param=where)
    if not isinstance(spec.get("name"), str):
        raise Uncompactable(f"`{where}.name` must be a string, got {_kind(spec.get('name'))}.", param=f"{where}.name")


def check_messages(messages: list[dict[str, Any]], start: int = 0, end: int | None = None) -> None:
    """Check ``messages[start:end]``; raises ``Uncompactable`` naming the first ctxproxy cannot model."""
    stop = len(messages) if end is None else min(end, len(messages))
    for i in range(start, stop):
        message = messages[i]
        # The common message, a role and its text (and a name), passes as ``_check_message`` passes it.
        plain = type(message) is dict and type(message.get("content")) is str and message.get("role") in _TEXT_ROLES
        if not plain or len(message) != 2 + ("name" in message) or type(message.get("name")) not in _NAME:
            _check_message(message, f"messages[{i}]")


def _check_message(message: Any, where: str) -> None:
    if not isinstance(message, dict):
        raise Uncompactable(
            f"`{where}` must be an object with `role` and `content`, got {_kind(message)}.", param=where
        )
    role = message.get("role")
    if role not in ROLES:
        got = "missing" if role is None else "another role"
        raise Uncompactable(f"`{where}.role` is not one of {', '.join(ROLES)}: {got}.", param=f"{where}.role")
    content = message.get("content")
    has_calls = bool(message.get("tool_calls") or message.get("function_call"))
    if content is None:
        if role == ROLE_ASSISTANT and (has_calls or "refusal" in message or "audio" in message):
            pass
        elif role == ROLE_ASSISTANT:
            raise Uncompactable(
                f"`{where}.content` is required unless the assistant message has `tool_calls`.",
                param=f"{where}.content",
            )
        else:
            raise Uncompactable(f"`{where}.content` is required for a {role} message.", param=f"{where}.content")
    elif isinstance(content, list):
        _check_parts(content, f"{where}.content", text_only=role in _TEXT_ONLY_ROLES)
    elif not isinstance(content, str):
        raise Uncompactable(
            f"`{where}.content` must be a string or a list of content parts, got {_kind(content)}.",
            param=f"{where}.content",
        )
    if role == ROLE_TOOL and not isinstance(message.get("tool_call_id"), str):
        raise Uncompactable(
            f"`{where}.tool_call_id` is required for a tool message (a string).", param=f"{where}.tool_call_id"
        )
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise Uncompactable(f"`{where}.name` must be a string, got {_kind(name)}.", param=f"{where}.name")
    if "tool_calls" in message and message["tool_calls"] is not None:
        _check_tool_calls(message["tool_calls"], f"{where}.tool_calls", role)


def _check_parts(parts: list[Any], where: str, *, text_only: bool) -> None:
    for j, part in enumerate(parts):
        here = f"{where}[{j}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise Uncompactable(f'`{here}` must be an object with a string `type` (e.g. "text").', param=here)
        kind = part["type"]
        if kind == "text" and not isinstance(part.get("text"), str):
            raise Uncompactable(f"`{here}.text` must be a string.", param=f"{here}.text")
        if text_only and kind != "text":
            raise Uncompactable(f"`{here}` must be a text part in this message, got type {kind!r}.", param=here)
        if kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else None
            if not isinstance(url, str):
                raise Uncompactable(f"`{here}.image_url.url` must be a string.", param=f"{here}.image_url.url")


def _check_tool_calls(calls: Any, where: str, role: str) -> None:
    if role != ROLE_ASSISTANT:
        raise Uncompactable(f"`{where}` is only valid on assistant messages.", param=where)
    if not isinstance(calls, list):
        raise Uncompactable(f"`{where}` must be a list, got {_kind(calls)}.", param=where)
    for k, call in enumerate(calls):
        here = f"{where}[{k}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not isinstance(function, dict):
            raise Uncompactable(f"`{here}` must be an object with a string `id` and a `function` object.", param=here)
        if not isinstance(function.get("name"), str) or not isinstance(function.get("arguments"), str):
            raise Uncompactable(
                f"`{here}.function` needs a string `name` and `arguments` (JSON encoded as a string).",
                param=f"{here}.function",
            )

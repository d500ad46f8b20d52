"""Canonical messages back into a Responses body (pure).

``render_body(body, messages)``: ``body`` with ``instructions`` and ``input`` written from the
canonical list (``canonical``), ``extra_tools`` appended to ``tools``, every other field as the
client sent it. ``body`` and ``messages`` are not changed.

* A message that still is what its items made (``canonical.canonical_of`` of its
  :data:`ITEMS_KEY` equals it) is written as those items, exactly as the client sent them: ids,
  statuses, ``encrypted_content`` and fields ctxproxy has never heard of included. An unchanged
  conversation therefore comes back item for item; a compacted one is the client's items with
  some left out and ctxproxy's own messages among them.
* The system message made of ``instructions`` goes back to ``instructions`` (and when it is gone,
  so is ``instructions``).
* A message ctxproxy wrote (a summary, memories) or changed is written as the API takes it: a
  user, system or developer message as ``{"type": "message", "role", "content"}`` (a string, or
  ``input_*`` parts), an assistant message's text as an assistant message with string content, its
  opaque parts as their items and its calls as their items (or a ``function_call`` when changed),
  a tool message as a ``function_call_output`` (or its own output item while unchanged). ``name``
  has no place in the API and is dropped.
* An output whose call is not before it (its call was left out) becomes a user message saying
  whose result it is: the API refuses an output without its call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import orjson

from ctxproxy.vocabulary import ROLE_ASSISTANT, ROLE_TOOL, ROLE_USER, SYSTEM_ROLES
from ctxproxy.wire.openai_responses.canonical import (
    INSTRUCTIONS_KEY,
    ITEM_KEY,
    ITEMS_KEY,
    PART_KEY,
    PRIVATE_KEYS,
    canonical_of,
)
from ctxproxy.wire.openai_responses.items import CUSTOM_OUTPUT, FUNCTION_CALL, FUNCTION_OUTPUT, MESSAGE, kind_of

__all__ = ["ORPHAN_LABEL", "render_body", "render_items"]

ORPHAN_LABEL: Final = "[Result of an earlier tool call {call_id}]"

Item = dict[str, Any]
Message = Mapping[str, Any]


def render_body(
    body: Mapping[str, Any], messages: Sequence[Message], *, extra_tools: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    out = dict(body)
    instructions = next((m for m in messages if m.get(INSTRUCTIONS_KEY) and isinstance(m.get("content"), str)), None)
    if instructions is not None:
        out["instructions"] = instructions["content"]
    elif isinstance(body.get("instructions"), str) and body["instructions"]:
        del out["instructions"]  # its message is no longer in the list (an empty one never was)
    out["input"] = render_items(m for m in messages if m is not instructions)
    tools = body.get("tools")
    if isinstance(tools, list) or extra_tools:
        out["tools"] = [*(tools if isinstance(tools, list) else []), *extra_tools]
    return out


def render_items(messages: Iterable[Message]) -> list[Item]:
    """The input items of ``messages`` (see the module)."""
    items: list[Item] = []
    called: set[Any] = set()
    for message in messages:
        for item in _items_of(message):
            call_id = item.get("call_id")
            if kind_of(item) == "output" and call_id not in called:
                item = _orphan(message)
            elif kind_of(item) == "call":
                called.add(call_id)
            items.append(item)
    return items


def _items_of(message: Message) -> list[Item]:
    stored = message.get(ITEMS_KEY)
    if isinstance(stored, list) and stored and _unchanged(message, stored):
        return [dict(item) for item in stored]
    role = message.get("role")
    if role == ROLE_TOOL:
        return [_output_item(message)]
    items = _content_items(role if role in (*SYSTEM_ROLES, ROLE_ASSISTANT) else ROLE_USER, message.get("content"))
    for call in message.get("tool_calls") or () if role == ROLE_ASSISTANT else ():
        items.append(_call_item(call))
    return items


def _unchanged(message: Message, stored: Sequence[Mapping[str, Any]]) -> bool:
    made = canonical_of(stored)
    mine = {k: v for k, v in message.items() if k not in PRIVATE_KEYS}
    return mine == {k: v for k, v in made.items() if k not in PRIVATE_KEYS}


def _content_items(role: str, content: Any) -> list[Item]:
    """A message's content as items: its opaque items as they came, the parts between them as
    messages of ``role`` (an assistant's as one string, the API's safest form for it)."""
    if not isinstance(content, list):
        return [_message(role, [{"type": "text", "text": content or ""}])] if content or role != ROLE_ASSISTANT else []
    items: list[Item] = []
    run: list[Any] = []
    for part in content:
        original = part.get(ITEM_KEY) if isinstance(part, Mapping) else None
        if isinstance(original, Mapping):
            items += [_message(role, run)] if run else []
            items.append(dict(original))
            run = []
        else:
            run.append(part)
    return items + ([_message(role, run)] if run else [])


def _message(role: str, parts: Sequence[Any]) -> Item:
    if role == ROLE_ASSISTANT:
        return {"type": MESSAGE, "role": role, "content": "".join(_text_of(part) for part in parts)}
    if len(parts) == 1 and isinstance(parts[0], Mapping) and set(parts[0]) == {"type", "text"}:
        return {"type": MESSAGE, "role": role, "content": _text_of(parts[0])}
    return {"type": MESSAGE, "role": role, "content": [_input_part(part) for part in parts]}


def _output_item(message: Message) -> Item:
    """A changed tool message: its function or custom output item with the new output, else a
    ``function_call_output`` (an opaque output item it still holds goes back as it is)."""
    stored = message.get(ITEMS_KEY)
    original = stored[0] if isinstance(stored, list) and len(stored) == 1 else None
    content = message.get("content")
    kept = [p.get(ITEM_KEY) for p in content if isinstance(p, Mapping)] if isinstance(content, list) else []
    if len(kept) == 1 and isinstance(kept[0], Mapping) and kind_of(kept[0]) == "output":
        return dict(kept[0])
    output = content if isinstance(content, str) else _input_content(content)
    if isinstance(original, Mapping) and original.get("type") in (FUNCTION_OUTPUT, CUSTOM_OUTPUT):
        return {**original, "call_id": message.get("tool_call_id"), "output": output}
    return {"type": FUNCTION_OUTPUT, "call_id": message.get("tool_call_id"), "output": output}


def _call_item(call: Mapping[str, Any]) -> Item:
    given = call.get("function")
    function: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    original = call.get(ITEM_KEY)
    if isinstance(original, Mapping):
        made = canonical_of([original])
        calls = made.get("tool_calls") or [{}]
        if calls[0].get("id") == call.get("id") and calls[0].get("function") == function:
            return dict(original)
    return {
        "type": FUNCTION_CALL,
        "call_id": call.get("id"),
        "name": function.get("name"),
        "arguments": function.get("arguments") if isinstance(function.get("arguments"), str) else "{}",
    }


def _input_content(content: Any) -> Any:
    if isinstance(content, list):
        return [_input_part(part) for part in content]
    return "" if content is None else content


def _input_part(part: Any) -> dict[str, Any]:
    if not isinstance(part, Mapping):
        return {"type": "input_text", "text": _json(part)}
    original = part.get(PART_KEY)
    if isinstance(original, Mapping):
        return dict(original)
    kind = part.get("type")
    if kind == "image_url" and isinstance(part.get("image_url"), Mapping):
        image = part["image_url"]
        return {"type": "input_image", "image_url": image.get("url"), "detail": image.get("detail") or "auto"}
    if kind == "file" and isinstance(part.get("file"), Mapping):
        return {"type": "input_file", **part["file"]}
    if kind == "input_audio":
        return {"type": "input_audio", "input_audio": part.get("input_audio")}
    return {"type": "input_text", "text": _text_of(part)}


def _text_of(part: Any) -> str:
    if isinstance(part, Mapping):
        for name in ("text", "refusal"):
            if isinstance(part.get(name), str):
                return str(part[name])
    return part if isinstance(part, str) else _json(part)


def _orphan(message: Message) -> Item:
    """A tool result whose call is not before it, as a user message."""
    label = ORPHAN_LABEL.format(call_id=message.get("tool_call_id"))
    content = message.get("content")
    if isinstance(content, str) or content is None:
        return {"type": MESSAGE, "role": ROLE_USER, "content": f"{label}\n{content or ''}".rstrip()}
    parts = [{"type": "input_text", "text": label}, *_input_content(content)]
    return {"type": MESSAGE, "role": ROLE_USER, "content": parts}


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return str(value)

"""Canonical messages back into a Gemini body (pure).

``render_body(body, messages)``: ``body`` with ``systemInstruction`` and ``contents`` written
from the canonical list (``canonical``), every other field as the client sent it (under its own
spelling). ``body`` and ``messages`` are not changed.

* The messages made of one client content (``canonical.AT_KEY``) that are still what it made are
  written as that content, exactly as the client sent it: thoughts, signatures, ids and fields
  ctxproxy has never heard of included. An unchanged conversation comes back content for content;
  a compacted one is the client's contents with some left out and ctxproxy's own among them.
* The system message made of ``systemInstruction`` goes back there (as it came while unchanged);
  when it is gone, so is the field.
* A message ctxproxy wrote (a summary, memories, the Contents Page) is a ``user`` content of text:
  Gemini has no system role in ``contents``, and a conversation opens with the user.
* A message changed by compaction is written as the API takes it: an assistant message as a
  ``model`` content (its parts as they came where they are unchanged, a changed call as a
  ``functionCall``), tool messages as ``functionResponse`` parts of one ``user`` content with the
  rest of what that content said (Gemini wants a turn's responses together). A tool message whose
  call is not in the content before it (its call was left out) becomes text saying whose result
  it is: the API refuses a response without its call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from ctxproxy.vocabulary import ROLE_ASSISTANT, ROLE_TOOL
from ctxproxy.wire.gemini.canonical import (
    AT_KEY,
    MODEL,
    PART_KEY,
    PRIVATE_KEYS,
    SYSTEM_KEY,
    USER,
    response_text,
    text_key,
    to_messages,
)
from ctxproxy.wire.gemini.fields import field, spelled

__all__ = ["ORPHAN_LABEL", "render_body"]

ORPHAN_LABEL: Final = "[Result of an earlier call of {name}]"

Content = dict[str, Any]
Message = Mapping[str, Any]


def render_body(body: Mapping[str, Any], messages: Sequence[Message]) -> dict[str, Any]:
    out = dict(body)
    original = _by_content(to_messages(body))
    contents = field(body, "contents")
    given: list[Any] = contents if isinstance(contents, list) else []
    system = next((m for m in messages if m.get(SYSTEM_KEY)), None)
    system_name = spelled(body, "systemInstruction") or "systemInstruction"
    if system is None:
        out.pop(system_name, None)
    elif _same([system], original.get(None, [])):
        pass  # as the client sent it
    else:
        out[system_name] = {"parts": _text_parts(system.get("content"))}
    rendered: list[Content] = []
    called: set[Any] = set()
    for group in _groups([m for m in messages if not m.get(SYSTEM_KEY)]):
        at = group[0].get(AT_KEY)
        answered = all(m.get("tool_call_id") in called for m in group if m.get("role") == ROLE_TOOL)
        if answered and isinstance(at, int) and 0 <= at < len(given) and _same(group, original.get(at, [])):
            content = given[at]
        else:
            content = _fresh(group, called)
        called = _call_ids(group) if content.get("role") == MODEL else set()
        rendered.append(content)
    out[spelled(body, "contents") or "contents"] = rendered
    return out


def _by_content(messages: Sequence[Message]) -> dict[int | None, list[Message]]:
    """The messages each content made (None: the system instruction's)."""
    out: dict[int | None, list[Message]] = {}
    for message in messages:
        at = message.get(AT_KEY)
        out.setdefault(at if isinstance(at, int) else None, []).append(message)
    return out


def _groups(messages: Sequence[Message]) -> list[list[Message]]:
    """Runs of messages made of one content; each message of ctxproxy's own is a run of its own."""
    groups: list[list[Message]] = []
    for message in messages:
        at = message.get(AT_KEY)
        if groups and at is not None and groups[-1][0].get(AT_KEY) == at:
            groups[-1].append(message)
        else:
            groups.append([message])
    return groups


def _same(group: Sequence[Message], made: Sequence[Message]) -> bool:
    if len(group) != len(made):
        return False
    return all(_public(a) == _public(b) for a, b in zip(group, made, strict=True))


def _public(message: Message) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in PRIVATE_KEYS}


def _call_ids(group: Sequence[Message]) -> set[Any]:
    return {call.get("id") for m in group for call in m.get("tool_calls") or () if isinstance(call, Mapping)}


def _fresh(group: Sequence[Message], called: set[Any]) -> Content:
    """One content of the messages of ``group`` (made of one client content, or one of ours)."""
    if group[0].get("role") == ROLE_ASSISTANT and group[0].get(AT_KEY) is not None:
        return {"role": MODEL, "parts": [p for m in group for p in _model_parts(m)]}
    parts: list[Any] = []
    for message in group:
        if message.get("role") == ROLE_TOOL:
            parts.append(_response(message) if message.get("tool_call_id") in called else _orphan(message))
        else:
            parts += _text_parts(message.get("content"))
    return {"role": USER, "parts": parts}


def _model_parts(message: Message) -> list[Any]:
    parts = _text_parts(message.get("content"))
    for call in message.get("tool_calls") or ():
        parts.append(_call_part(call))
    return parts


def _call_part(call: Mapping[str, Any]) -> Any:
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    original = call.get(PART_KEY)
    arguments = function.get("arguments")
    if isinstance(original, Mapping):
        made = field(original, "functionCall")
        if isinstance(made, Mapping) and made.get("name") == function.get("name"):
            if _loads(arguments) == (made.get("args") or {}):
                return dict(original)
    return {"functionCall": {"name": function.get("name"), "args": _loads(arguments)}}


def _response(message: Message) -> dict[str, Any]:
    original = message.get(PART_KEY)
    content = message.get("content")
    made = field(original, "functionResponse") if isinstance(original, Mapping) else None
    response = made.get("response") if isinstance(made, Mapping) else None
    if isinstance(made, Mapping) and content == response_text(response):
        if made.get("name") == message.get("name"):
            return dict(original)  # type: ignore[arg-type]
    text = content if isinstance(content, str) else _joined(content)
    key = text_key(response)
    if key is not None:  # a one-string response changed (compressed, masked): the same field
        return {"functionResponse": {"name": message.get("name"), "response": {key: text}}}
    parsed = _loads(text)
    return {"functionResponse": {"name": message.get("name"), "response": parsed if parsed else {"output": text}}}


def _orphan(message: Message) -> dict[str, Any]:
    content = message.get("content")
    text = content if isinstance(content, str) else _joined(content)
    return {"text": f"{ORPHAN_LABEL.format(name=message.get('name') or 'a tool')}\n{text}".rstrip()}


def _text_parts(content: Any) -> list[Any]:
    """A message's content as Gemini parts: the client's own where a part still is what it made."""
    if not isinstance(content, list):
        return [{"text": content}] if isinstance(content, str) and content else []
    out: list[Any] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        original = part.get(PART_KEY)
        if isinstance(original, Mapping) and (part.get("type") != "text" or original.get("text") == part.get("text")):
            out.append(dict(original))
        elif isinstance(part.get("text"), str):
            out.append({"text": part["text"]})
        else:
            out.append({"text": _dumps({k: v for k, v in part.items() if k != PART_KEY})})
    return out


def _joined(content: Any) -> str:
    parts = content if isinstance(content, list) else []
    return "".join(p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str))


def _loads(text: Any) -> Any:
    """The JSON object ``text`` holds, or {} (Gemini's ``args`` and ``response`` are objects)."""
    if not isinstance(text, str):
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _dumps(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return str(value)

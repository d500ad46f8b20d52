"""A Gemini body's ``systemInstruction`` and ``contents`` as ctxproxy's canonical messages (pure).

The canonical messages are OpenAI chat messages (``ctxproxy.vocabulary``):

* ``systemInstruction`` is a system message first, marked :data:`SYSTEM_KEY`;
* a ``model`` content is one assistant message: its text parts as text parts, its
  ``functionCall`` parts as ``tool_calls`` (``arguments``: the ``args``' JSON), every other part
  (thoughts, code, inline data …) an opaque part in its place. A call's id is its ``id`` when
  it has one, else ``call_<content>_<n>`` (the n-th call of the content at that index);
* a ``user`` content (or one without a role) is one ``tool`` message per ``functionResponse``
  part (``content``: the ``response``'s JSON, or its text when it is one string field;
  ``name``: the function's), then one user message of
  its other parts, if any. A response is paired with the call of the model content before it by
  its ``id``, else by position (Gemini pairs the n-th response with the n-th call); one that has
  no call there gets an id no call has.

A text part with fields beside ``text`` (a ``thoughtSignature``, ``thought``…) keeps the client's
part under :data:`PART_KEY`, and so do opaque parts, calls and tool messages: written back as they
came while unchanged. Every
message keeps the index of the content it was made of under :data:`AT_KEY`: ``render`` writes a
content back exactly as the client sent it while the messages made of it are unchanged, so a
model turn with thoughts or calls stays whole, signatures included.

Opaque parts are counted as their JSON except: an image (``inlineData`` / ``fileData`` of an
``image/*`` type) as Gemini bills one, :data:`IMAGE_TOKENS`; a thought by its text alone (its
signature is not prompt text).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import orjson

from ctxproxy.vocabulary import PART_TOKENS_HINT, ROLE_ASSISTANT, ROLE_SYSTEM, ROLE_TOOL, ROLE_USER
from ctxproxy.wire.gemini.fields import field

__all__ = [
    "AT_KEY",
    "IMAGE_TOKENS",
    "MODEL",
    "PART_KEY",
    "PRIVATE_KEYS",
    "SYSTEM_KEY",
    "USER",
    "call_id",
    "contents_messages",
    "part_kind",
    "system_messages",
    "to_messages",
]

AT_KEY: Final = "gemini_at"  # on a message: the index in ``contents`` of the content it was made of
PART_KEY: Final = "gemini_part"  # on a part or a call: the client's part
SYSTEM_KEY: Final = "gemini_system"  # on the system message made of ``systemInstruction``
PRIVATE_KEYS: Final = frozenset({AT_KEY, SYSTEM_KEY})
USER: Final = "user"
MODEL: Final = "model"
IMAGE_TOKENS: Final = 258  # Gemini's price of an image up to 384 px a side (larger ones: per 768 px tile)
THOUGHT_FRAMING_TOKENS: Final = 4
# The data fields a part may carry, exactly one each (the ``Part`` union of the API).
DATA_FIELDS: Final = (
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
)

Message = dict[str, Any]
Part = Mapping[str, Any]


def to_messages(body: Mapping[str, Any]) -> list[Message]:
    """The body's ``systemInstruction`` and ``contents`` as canonical messages (see the module)."""
    contents = field(body, "contents")
    contents = contents if isinstance(contents, list) else []
    return system_messages(body) + [m for at in range(len(contents)) for m in contents_messages(contents, at)]


def system_messages(body: Mapping[str, Any]) -> list[Message]:
    """The body's ``systemInstruction`` as canonical messages: one, or none."""
    system = field(body, "systemInstruction")
    if isinstance(system, Mapping):
        return [{"role": ROLE_SYSTEM, "content": _parts(field(system, "parts")), SYSTEM_KEY: True}]
    return []


def contents_messages(contents: Sequence[Mapping[str, Any]], at: int) -> list[Message]:
    """The messages ``contents[at]`` makes (``ctxproxy.wire.converted.ConvertOne``)."""
    before = contents[at - 1] if at > 0 else None
    return content_messages(contents[at], at, before if before is not None and before.get("role") == MODEL else None)


def content_messages(content: Mapping[str, Any], at: int, previous: Mapping[str, Any] | None) -> list[Message]:
    """The messages the content at index ``at`` makes (``previous``: the model content right
    before it, whose calls its responses answer)."""
    parts = field(content, "parts")
    parts = parts if isinstance(parts, list) else []
    if content.get("role") == MODEL:
        return [_assistant(parts, at)]
    calls = list(_calls(previous, at - 1)) if previous is not None else []
    out: list[Message] = []
    rest: list[Part] = []
    answered = 0
    for part in parts:
        response = field(part, "functionResponse")
        if not isinstance(response, Mapping):
            rest.append(part)
            continue
        out.append({**_tool(response, _answers(response, calls, answered, at)), PART_KEY: part})
        answered += 1
    if rest or not out:
        out.append({"role": ROLE_USER, "content": _parts(rest)})
    for message in out:
        message[AT_KEY] = at
    return out


def call_id(call: Mapping[str, Any], at: int, n: int) -> str:
    """A call's id: its own, else one made of its place (the n-th call of the content at ``at``)."""
    own = call.get("id")
    return own if isinstance(own, str) and own else f"call_{at}_{n}"


def part_kind(part: Part) -> str:
    """The data field a part carries (``thought`` for a thought's text), else ``part``."""
    if part.get("thought") is True:
        return "thought"
    return next((name for name in DATA_FIELDS if field(part, name) is not None), "part")


def _calls(content: Mapping[str, Any], at: int) -> Iterator[tuple[str, Mapping[str, Any]]]:
    parts = field(content, "parts")
    n = 0
    for part in parts if isinstance(parts, list) else ():
        call = field(part, "functionCall")
        if isinstance(call, Mapping):
            yield call_id(call, at, n), call
            n += 1


def _answers(response: Mapping[str, Any], calls: Sequence[tuple[str, Mapping[str, Any]]], n: int, at: int) -> str:
    own = response.get("id")
    if isinstance(own, str) and own:
        return own
    if n < len(calls) and calls[n][1].get("name") == response.get("name"):
        return calls[n][0]
    return f"result_{at}_{n}"


def _assistant(parts: Sequence[Part], at: int) -> Message:
    content: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for part in parts:
        call = field(part, "functionCall")
        if isinstance(call, Mapping):
            arguments = _json(call.get("args") or {})
            function = {"name": call.get("name"), "arguments": arguments}
            made = {"id": call_id(call, at, len(calls)), "type": "function", "function": function}
            calls.append({**made, PART_KEY: part})
        else:
            content.append(_part(part))
    message: Message = {"role": ROLE_ASSISTANT, "content": content, AT_KEY: at}
    if calls:
        message["tool_calls"] = calls
    return message


def _tool(response: Mapping[str, Any], answers: str) -> Message:
    name = response.get("name")
    message: Message = {"role": ROLE_TOOL, "tool_call_id": answers, "content": response_text(response.get("response"))}
    if isinstance(name, str):
        message["name"] = name
    return message


def _parts(parts: Any) -> list[dict[str, Any]]:
    return [_part(part) for part in parts] if isinstance(parts, list) else []


def _part(part: Any) -> dict[str, Any]:
    if not isinstance(part, Mapping):
        return {"type": "part", PART_KEY: part}
    kind = part_kind(part)
    if kind == "text":
        text = part.get("text")
        plain: dict[str, Any] = {"type": "text", "text": text}
        return plain if set(part) == {"text"} else {**plain, PART_KEY: part}
    opaque: dict[str, Any] = {"type": kind, PART_KEY: part}
    hint = _hint(part, kind)
    if hint is not None:
        opaque[PART_TOKENS_HINT] = hint
    return opaque


def _hint(part: Part, kind: str) -> int | None:
    if kind == "thought":
        text = part.get("text")
        return -(-len(text) // 4) + THOUGHT_FRAMING_TOKENS if isinstance(text, str) else THOUGHT_FRAMING_TOKENS
    if kind in ("inlineData", "fileData"):
        data = field(part, kind)
        mime = field(data, "mimeType") if isinstance(data, Mapping) else None
        if isinstance(mime, str) and mime.startswith("image/"):
            return IMAGE_TOKENS
    return None


def response_text(response: Any) -> str:
    """A ``functionResponse``'s ``response`` as a tool message's text: the string itself when it
    is one string field (``{"output": "…"}``, as the SDKs wrap a function's return value), so a
    tool's log or file is its text, compressed and retrieved as such; else its JSON."""
    key = text_key(response)
    return response[key] if key is not None else _json(response)


def text_key(response: Any) -> str | None:
    """The one field of a response that is its only field and a string, else None."""
    if isinstance(response, Mapping) and len(response) == 1:
        ((key, value),) = response.items()
        if isinstance(key, str) and isinstance(value, str):
            return key
    return None


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return "{}"

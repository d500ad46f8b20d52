"""A Responses body's ``instructions`` and ``input`` as ctxproxy's canonical messages (pure).

The canonical messages are OpenAI chat messages (``ctxproxy.vocabulary``), built item by item as
``items.kind_of`` sorts them:

* ``instructions`` (a string) is a system message first, marked :data:`INSTRUCTIONS_KEY`; an
  ``input`` string is one user message;
* a user, system or developer ``message`` keeps its role; its content is a string as it is, or
  parts: ``input_text`` / ``output_text`` become ``text`` parts, ``refusal`` stays, an
  ``input_image`` with a URL becomes an ``image_url`` part, ``input_file`` a ``file`` part and
  ``input_audio`` an ``input_audio`` part (what the token counter knows how to count); any other
  part is opaque (:func:`opaque_part`);
* a run of assistant-side items (assistant messages, reasoning, calls, server-side and unknown
  items) is one assistant message: the messages' parts and every other item as an opaque part, in
  order, and the calls as ``tool_calls`` (``id``: the ``call_id``; a function's ``name`` and
  ``arguments``, a custom tool's ``input`` as its arguments, any other call its type as the name
  and its fields' JSON as arguments), each call keeping its item under :data:`ITEM_KEY`;
* an output is a ``tool`` message for its ``call_id``: a string ``output`` as its content, a list
  as parts, any other output as one opaque part;
* a ``compaction`` or ``additional_tools`` item is a developer message of one opaque part: kept
  word for word, never summarised (ctxproxy cannot read it).

An opaque part is ``{"type": <the item's or part's type>, ITEM_KEY | PART_KEY: <it>}``: counted
as its JSON (a reasoning item by its summary alone, :func:`reasoning_tokens`), named by its type
in a summariser's transcript (``[reasoning]``), and written back as it came. Every canonical
message keeps the items it was made of under :data:`ITEMS_KEY`, so ``render`` writes the client's
items back exactly while the message is unchanged (:func:`canonical_of` is the conversion of one
message's items, for that comparison).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from ctxproxy.vocabulary import PART_TOKENS_HINT, ROLE_ASSISTANT, ROLE_DEVELOPER, ROLE_SYSTEM, ROLE_TOOL, ROLE_USER
from ctxproxy.wire.openai_responses.items import (
    CUSTOM_CALL,
    CUSTOM_OUTPUT,
    FUNCTION_CALL,
    FUNCTION_OUTPUT,
    MESSAGE,
    TEXT_PARTS,
    item_type,
    kind_of,
)

__all__ = [
    "INSTRUCTIONS_KEY",
    "ITEMS_KEY",
    "ITEM_KEY",
    "PART_KEY",
    "PRIVATE_KEYS",
    "canonical_of",
    "instructions_messages",
    "item_messages",
    "opaque_part",
    "reasoning_tokens",
    "to_messages",
]

ITEMS_KEY: Final = "responses_items"  # on a message: the client's items it was made of
ITEM_KEY: Final = "responses_item"  # on a tool call or an opaque part: its item
PART_KEY: Final = "responses_part"  # on an opaque part: the client's content part
INSTRUCTIONS_KEY: Final = "responses_instructions"  # on the system message made of ``instructions``
PRIVATE_KEYS: Final = frozenset({ITEMS_KEY, INSTRUCTIONS_KEY})
REASONING: Final = "reasoning"
REASONING_FRAMING_TOKENS: Final = 4

_RUN: Final = ("assistant", "call")  # the kinds of item a run of assistant-side items is made of

Message = dict[str, Any]
Item = Mapping[str, Any]


def to_messages(body: Mapping[str, Any]) -> list[Message]:
    """The body's ``instructions`` and ``input`` as canonical messages (see the module)."""
    out = instructions_messages(body)
    source = body.get("input")
    if isinstance(source, str):
        out.append({"role": ROLE_USER, "content": source})
        return out
    items = source if isinstance(source, list) else []
    return out + [message for i in range(len(items)) for message in item_messages(items, i)]


def instructions_messages(body: Mapping[str, Any]) -> list[Message]:
    """The body's ``instructions`` as canonical messages: one, or none."""
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        return [{"role": ROLE_SYSTEM, "content": instructions, INSTRUCTIONS_KEY: True}]
    return []


def item_messages(items: Sequence[Item], i: int) -> list[Message]:
    """The canonical messages ``items[i]`` completes (``ctxproxy.wire.converted.ConvertOne``,
    with lookahead): its own, none for a ``compaction_trigger``, and for an item of a run of
    assistant-side items none until the run's last, which makes the run's message."""
    item = items[i]
    kind = kind_of(item) if isinstance(item, dict) else None
    if kind not in _RUN:
        return [] if kind == "trigger" else [canonical_of([item])]
    if i + 1 < len(items) and _in_run(items[i + 1]):
        return []
    start = i
    while start > 0 and _in_run(items[start - 1]):
        start -= 1
    return [canonical_of(items[start : i + 1])]


def _in_run(item: Any) -> bool:
    """Whether ``item`` belongs to a run of assistant-side items (one not checked yet, not an
    object, does not)."""
    return isinstance(item, dict) and kind_of(item) in _RUN


def canonical_of(items: Sequence[Item]) -> Message:
    """The canonical message ``items`` make: one message, output or verbatim item, or a run of
    assistant-side items."""
    first = items[0]
    kind = kind_of(first)
    if kind == "message":
        message: Message = {"role": first.get("role"), "content": _content(first.get("content"))}
    elif kind == "output":
        message = {"role": ROLE_TOOL, "tool_call_id": first.get("call_id"), "content": _output(first)}
    elif kind == "verbatim":
        message = {"role": ROLE_DEVELOPER, "content": [opaque_part(first)]}
    else:
        message = _assistant(items)
    message[ITEMS_KEY] = list(items)
    return message


def opaque_part(item: Item) -> dict[str, Any]:
    """An item ctxproxy does not read, as a content part (a reasoning item with its token hint)."""
    part: dict[str, Any] = {"type": item_type(item) or "item", ITEM_KEY: item}
    if part["type"] == REASONING:
        part[PART_TOKENS_HINT] = reasoning_tokens(item)
    return part


def reasoning_tokens(item: Item) -> int:
    """What a reasoning item costs in a prompt, as far as anyone outside the provider can tell:
    its summary's text (a token per 4 characters) and a few tokens of framing. Not its
    ``encrypted_content``: OpenAI drops the reasoning of earlier turns from the context (and
    does not bill it), and how many tokens the rest holds its ciphertext does not say. Counted as
    base64, a Codex session's reasoning items would look many times larger than the prompt the
    upstream reports, and ctxproxy would take the difference for a silent truncation."""
    summary = item.get("summary")
    parts = summary if isinstance(summary, list) else []
    chars = sum(len(p["text"]) for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return -(-chars // 4) + REASONING_FRAMING_TOKENS


def _assistant(items: Sequence[Item]) -> Message:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for item in items:
        kind = kind_of(item)
        if kind == "call":
            calls.append(_call(item))
        elif item_type(item) == MESSAGE:
            content = _content(item.get("content"))
            parts += [{"type": "text", "text": content}] if isinstance(content, str) else content
        else:
            parts.append(opaque_part(item))
    message: Message = {"role": ROLE_ASSISTANT, "content": parts}
    if calls:
        message["tool_calls"] = calls
    return message


def _call(item: Item) -> dict[str, Any]:
    kind = item_type(item)
    if kind == FUNCTION_CALL:
        function = {"name": item.get("name"), "arguments": item.get("arguments")}
    elif kind == CUSTOM_CALL:
        function = {"name": item.get("name"), "arguments": item.get("input")}
    else:
        fields = {k: v for k, v in item.items() if k not in ("type", "id", "call_id", "status")}
        function = {"name": kind, "arguments": _json(fields)}
    return {"id": item.get("call_id"), "type": "function", "function": function, ITEM_KEY: item}


def _output(item: Item) -> Any:
    if item_type(item) in (FUNCTION_OUTPUT, CUSTOM_OUTPUT):
        return _content(item.get("output"))
    return [opaque_part(item)]


def _content(content: Any) -> Any:
    if isinstance(content, list):
        return [_part(part) for part in content]
    return content


def _part(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind in TEXT_PARTS:
        return {"type": "text", "text": part.get("text")}
    if kind == "refusal":
        return {"type": "refusal", "refusal": part.get("refusal")}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        detail = part.get("detail")
        return {"type": "image_url", "image_url": {"url": part["image_url"], "detail": detail or "auto"}}
    if kind == "input_file":
        file = {name: part[name] for name in ("file_data", "filename", "file_id") if name in part}
        return {"type": "file", "file": file}
    if kind == "input_audio" and isinstance(part.get("input_audio"), Mapping):
        return {"type": "input_audio", "input_audio": part["input_audio"]}
    return {"type": kind if isinstance(kind, str) else "part", PART_KEY: part}


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return "{}"

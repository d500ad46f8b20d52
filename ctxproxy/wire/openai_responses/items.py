"""What a Responses input item is to ctxproxy, and whether ctxproxy can model it (pure).

``input`` is a string (one user message) or a list of items
(https://platform.openai.com/docs/api-reference/responses/create, the ``openai`` SDK's
``ResponseInputItemParam``). ctxproxy sorts each item into one of these kinds (``kind_of``):

==============  ====================================================================  ============
kind            items                                                                 canonical
==============  ====================================================================  ============
``message``     ``message`` (or no ``type`` and a ``role``) of role user, system or    its own
                developer
``assistant``   an assistant ``message``, ``reasoning``, every server-side item        one assistant
                (``web_search_call``, ``mcp_call`` …) and any unknown type             message per run
``call``        an item with a string ``call_id`` that is not an output                a tool call of
                (``function_call``, ``custom_tool_call``, ``shell_call`` …)           that message
``output``      an item with a string ``call_id`` whose type ends in ``_output``       a ``tool`` message
                (``function_call_output``, ``custom_tool_call_output`` …)
``verbatim``    ``compaction`` (a provider's compacted history) and                    a developer
                ``additional_tools``: context ctxproxy cannot read or summarise        message
``trigger``     ``compaction_trigger``: "compact now" (the last item)                  none
==============  ====================================================================  ============

A run of ``assistant`` and ``call`` items is what the model produced in one turn: it becomes one
canonical assistant message, so a ``reasoning`` item never leaves the item that follows it and
pairs without a ``call_id`` (``mcp_approval_request`` / ``_response``) stay together.

What ``check_items`` finds is not an error of the client's but something ctxproxy cannot compact
safely (``Uncompactable``, naming the field: ``input[3].content[0].text``): the request is then
forwarded as sent and the upstream judges it. Items whose kind ctxproxy does not read further are
not checked at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from ctxproxy.errors import Uncompactable
from ctxproxy.wire.json_body import json_kind

__all__ = [
    "COMPACTION",
    "COMPACTION_TRIGGER",
    "MESSAGE",
    "Kind",
    "check_item",
    "check_items",
    "item_type",
    "kind_of",
]

MESSAGE: Final = "message"
COMPACTION: Final = "compaction"
COMPACTION_TRIGGER: Final = "compaction_trigger"
FUNCTION_CALL: Final = "function_call"
CUSTOM_CALL: Final = "custom_tool_call"
FUNCTION_OUTPUT: Final = "function_call_output"
CUSTOM_OUTPUT: Final = "custom_tool_call_output"
ROLES: Final = ("user", "assistant", "system", "developer")
VERBATIM: Final = frozenset({COMPACTION, "additional_tools"})
TEXT_PARTS: Final = frozenset({"input_text", "output_text"})

Kind = Literal["message", "assistant", "call", "output", "verbatim", "trigger"]

# The string fields a call or output ctxproxy reads must have (others are opaque).
_CALL_STRINGS: dict[str, tuple[str, ...]] = {
    FUNCTION_CALL: ("call_id", "name", "arguments"),
    CUSTOM_CALL: ("call_id", "name", "input"),
    FUNCTION_OUTPUT: ("call_id",),
    CUSTOM_OUTPUT: ("call_id",),
    COMPACTION: ("encrypted_content",),
}


def item_type(item: Mapping[str, Any]) -> str | None:
    """The item's type: its ``type``, else ``message`` for an item with a ``role`` (the SDK's
    ``EasyInputMessageParam`` may leave ``type`` out)."""
    kind = item.get("type")
    if isinstance(kind, str):
        return kind
    return MESSAGE if kind is None and "role" in item else None


def kind_of(item: Mapping[str, Any]) -> Kind:
    """What ctxproxy makes of a checked item (see the module)."""
    kind = item_type(item)
    if kind == MESSAGE:
        return "assistant" if item.get("role") == "assistant" else "message"
    if kind == COMPACTION_TRIGGER:
        return "trigger"
    if kind in VERBATIM:
        return "verbatim"
    if isinstance(item.get("call_id"), str) and kind is not None:
        return "output" if kind.endswith("_output") else "call"
    return "assistant"


def check_items(items: Sequence[Any]) -> None:
    """Check every item of ``input``; ``Uncompactable`` names the first ctxproxy cannot model."""
    for i in range(len(items)):
        check_item(items, i)


def check_item(items: Sequence[Any], i: int) -> None:
    """Check ``items[i]`` (all of ``input`` given: a ``compaction_trigger`` must be the last)."""
    item, where = items[i], f"input[{i}]"
    if not isinstance(item, dict):
        raise Uncompactable(f"`{where}` must be an item object, got {json_kind(item)}.", param=where)
    kind = item.get("type")
    if kind is not None and not isinstance(kind, str):
        raise Uncompactable(f"`{where}.type` must be a string, got {json_kind(kind)}.", param=f"{where}.type")
    if item_type(item) == MESSAGE:
        _check_message(item, where)
    elif kind == COMPACTION_TRIGGER and i != len(items) - 1:
        message = f"`{where}`: a compaction_trigger item must be the last input item."
        raise Uncompactable(message, param=where)
    for name in _CALL_STRINGS.get(kind or "", ()):
        _check_string(item, name, where)
    if kind in (FUNCTION_OUTPUT, CUSTOM_OUTPUT):
        _check_output(item.get("output"), f"{where}.output")


def _check_message(item: Mapping[str, Any], where: str) -> None:
    role = item.get("role")
    if role not in ROLES:
        got = "nothing (it is missing)" if role is None else "another role"
        raise Uncompactable(f"`{where}.role` is not one of {', '.join(ROLES)}: {got}.", param=f"{where}.role")
    content = item.get("content")
    if isinstance(content, list):
        _check_parts(content, f"{where}.content")
    elif not isinstance(content, str):
        raise Uncompactable(
            f"`{where}.content` must be a string or a list of content parts, got {json_kind(content)}.",
            param=f"{where}.content",
        )


def _check_output(output: Any, where: str) -> None:
    if isinstance(output, list):
        _check_parts(output, where)
    elif not isinstance(output, str):
        raise Uncompactable(
            f"`{where}` must be a string or a list of content parts, got {json_kind(output)}.", param=where
        )


def _check_parts(parts: list[Any], where: str) -> None:
    for j, part in enumerate(parts):
        here = f"{where}[{j}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise Uncompactable(f'`{here}` must be an object with a string `type` (e.g. "input_text").', param=here)
        if part["type"] in TEXT_PARTS:
            _check_string(part, "text", here)
        elif part["type"] == "refusal":
            _check_string(part, "refusal", here)


def _check_string(obj: Mapping[str, Any], name: str, where: str) -> None:
    value = obj.get(name)
    if not isinstance(value, str):
        got = "nothing (it is missing)" if name not in obj else json_kind(value)
        raise Uncompactable(f"`{where}.{name}` must be a string, got {got}.", param=f"{where}.{name}")

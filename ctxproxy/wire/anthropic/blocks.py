"""Checking the ``messages`` of a Messages request, block by block (pure).

A message is ``{"role": "user" | "assistant" | "system", "content": string | [block, ...]}`` (a
system message inside ``messages`` is a newer API feature, sent by Claude Code); a block is an
object with a string ``type``. The block types ctxproxy reads are checked for the fields it reads,
with the JSON types the Messages API gives them (https://docs.claude.com/en/api/messages):

=====================  ==========================================================  ==========
type                   fields                                                      role
=====================  ==========================================================  ==========
``text``               ``text`` string
``image``              ``source`` {``type``: base64 (``data``), url (``url``),
                       file (``file_id``)}
``document``           ``source`` {base64 / text (``data``), url, file, content
                       (``content``: string or blocks)}
``tool_use``           ``id``, ``name`` strings, ``input`` object                  assistant
``server_tool_use``    ``id``, ``name`` strings, ``input`` object                  assistant
``tool_result``        ``tool_use_id`` string, ``content`` string or blocks,       user
                       ``is_error`` boolean
``thinking``           ``thinking``, ``signature`` strings                         assistant
``redacted_thinking``  ``data`` string                                             assistant
=====================  ==========================================================  ==========

Any other type is kept opaque: the upstream judges it. What these checks find is not an error of
the client's but something ctxproxy cannot compact safely (``Uncompactable``: the pipeline
forwards the request as sent); each names the offending field
(``messages[3].content[1].tool_use_id``). Whether tool results answer the tool calls before them,
and the order of roles, are left to the upstream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxproxy.errors import Uncompactable
from ctxproxy.wire.json_body import json_kind

__all__ = ["ROLES", "check_blocks", "check_messages"]

ROLES = ("user", "assistant", "system")
_STRINGS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "tool_use": ("id", "name"),
    "server_tool_use": ("id", "name"),
    "tool_result": ("tool_use_id",),
    "thinking": ("thinking", "signature"),
    "redacted_thinking": ("data",),
}
_ROLE_OF: dict[str, str] = {
    "tool_use": "assistant",
    "server_tool_use": "assistant",
    "thinking": "assistant",
    "redacted_thinking": "assistant",
    "tool_result": "user",
}
_SOURCE_STRINGS: dict[str, str] = {"base64": "data", "text": "data", "url": "url", "file": "file_id"}


def check_messages(messages: Sequence[Any], start: int = 0, end: int | None = None) -> None:
    """Check ``messages[start:end]``; raises ``Uncompactable`` naming the first field ctxproxy
    cannot model."""
    stop = len(messages) if end is None else min(end, len(messages))
    for i in range(start, stop):
        _check_message(messages[i], f"messages[{i}]")


def _check_message(message: Any, where: str) -> None:
    if not isinstance(message, dict):
        got = json_kind(message)
        raise Uncompactable(f"`{where}` must be an object with `role` and `content`, got {got}.", param=where)
    role = message.get("role")
    if role not in ROLES:
        got = _got(message, "role") if role is None else "another role"
        raise Uncompactable(f'`{where}.role` is not "user", "assistant" or "system": {got}.', param=f"{where}.role")
    content = message.get("content")
    if isinstance(content, list):
        check_blocks(content, f"{where}.content", role=role)
    elif not isinstance(content, str):
        got = _got(message, "content")
        raise Uncompactable(
            f"`{where}.content` must be a string or a list of content blocks, got {got}.", param=f"{where}.content"
        )


def check_blocks(blocks: list[Any], where: str, *, role: str | None = None) -> None:
    """Check a list of content blocks; ``role``: the message's, for the blocks bound to one role
    (None inside a tool result or a document, where no role applies)."""
    for j, block in enumerate(blocks):
        _check_block(block, f"{where}[{j}]", role)


def _check_block(block: Any, where: str, role: str | None) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise Uncompactable(f'`{where}` must be an object with a string `type` (e.g. "text").', param=where)
    kind = block["type"]
    bound = _ROLE_OF.get(kind)
    if bound is not None and role is not None and role != bound:
        message = f"`{where}`: {kind} blocks are only valid in {bound} messages, not in {role} ones."
        raise Uncompactable(message, param=where)
    for name in _STRINGS.get(kind, ()):
        if not isinstance(block.get(name), str):
            raise Uncompactable(f"`{where}.{name}` must be a string, got {_got(block, name)}.", param=f"{where}.{name}")
    if kind in ("tool_use", "server_tool_use") and not isinstance(block.get("input"), dict):
        raise Uncompactable(f"`{where}.input` must be an object, got {_got(block, 'input')}.", param=f"{where}.input")
    if kind == "tool_result":
        _check_tool_result(block, where)
    elif kind in ("image", "document"):
        _check_source(block, where)


def _check_tool_result(block: Mapping[str, Any], where: str) -> None:
    content = block.get("content")
    if isinstance(content, list):
        check_blocks(content, f"{where}.content")
    elif content is not None and not isinstance(content, str):
        raise Uncompactable(
            f"`{where}.content` must be a string or a list of content blocks, got {json_kind(content)}.",
            param=f"{where}.content",
        )
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise Uncompactable(
            f"`{where}.is_error` must be true or false, got {json_kind(is_error)}.", param=f"{where}.is_error"
        )


def _check_source(block: Mapping[str, Any], where: str) -> None:
    source = block.get("source")
    here = f"{where}.source"
    if not isinstance(source, dict) or not isinstance(source.get("type"), str):
        raise Uncompactable(
            f'`{here}` must be an object with a string `type` ("base64", "url", "file", ...).', param=here
        )
    field = _SOURCE_STRINGS.get(source["type"])
    if field is not None and not isinstance(source.get(field), str):
        raise Uncompactable(f"`{here}.{field}` must be a string, got {_got(source, field)}.", param=f"{here}.{field}")
    if source["type"] == "content":
        content = source.get("content")
        if isinstance(content, list):
            check_blocks(content, f"{here}.content")
        elif not isinstance(content, str):
            raise Uncompactable(
                f"`{here}.content` must be a string or a list of content blocks, got {_got(source, 'content')}.",
                param=f"{here}.content",
            )


def _got(obj: Mapping[str, Any], name: str) -> str:
    return "nothing (it is missing)" if name not in obj else json_kind(obj[name])

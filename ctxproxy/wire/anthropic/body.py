"""Parsing and checking a Messages request body (``POST /v1/messages``) before anything is forwarded.

The body is hostile input, and ctxproxy is never stricter than the Messages API
(https://docs.claude.com/en/api/messages): a request the API would take is never refused. Two
levels, therefore:

* **Unreadable** (``BadRequest``, a 400): not a JSON object, or ``messages`` missing, not a list or
  empty. Nothing can be done with it, and no provider takes it.
* **Not compactable** (``Uncompactable``, which the pipeline answers by forwarding the client's
  bytes as sent, saying so): a field ctxproxy reads (:data:`FIELDS`, ``system``, the tools'
  names, ``metadata.user_id``) or a message (``blocks``) in a form ctxproxy does not model. The
  upstream judges it, in its own words.

Every other field is left to the upstream and forwarded untouched, unknown ones included
(``context_management``, ``output_config``, any ``thinking`` form). Each reason names the
offending field (``tools[2].name``, ``messages[3].content[1].tool_use_id``).

``max_tokens`` is required by the API; a body without it is left for the upstream to refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxproxy.errors import Uncompactable
from ctxproxy.wire.anthropic.blocks import check_blocks, check_messages
from ctxproxy.wire.incremental import BodyLoader
from ctxproxy.wire.json_body import MISSING, FieldTypes, check_field_types, json_kind, load_object, require_messages

__all__ = ["FIELDS", "MessagesRequest", "load_body", "parse_body", "parse_messages_body"]


@dataclass(frozen=True)
class MessagesRequest:
    body: dict[str, Any]
    raw: bytes
    messages: list[dict[str, Any]]
    model: str
    stream: bool
    user: str | None  # metadata.user_id
    max_tokens: int | None


# The fields ctxproxy reads, with their one JSON type (bool is not a number: JSON true is not 1).
FIELDS: FieldTypes = {
    "model": ((str,), "a string"),
    "max_tokens": ((int,), "an integer"),
    "stream": ((bool,), "true or false"),
    "system": ((str, list), "a string or a list of text blocks"),
    "metadata": ((dict,), 'an object such as {"user_id": "..."}'),
    "tools": ((list,), 'a list of tool objects ({"name": ..., "input_schema": {...}})'),
}


def parse_messages_body(raw: bytes) -> MessagesRequest:
    """Parse and check the whole body, every message included."""
    request = parse_body(raw)
    check_messages(request.messages)
    return request


def load_body(raw: bytes, load: BodyLoader | None = None) -> dict[str, Any]:
    """The body as a JSON object with a non-empty ``messages`` list; ``BadRequest`` otherwise.
    ``load``: what parses the JSON (``ctxproxy.wire.incremental``), ``load_object`` when not given."""
    needs = "`model`, `max_tokens` and `messages`"
    body = load_object(raw, needs=needs) if load is None else load(raw, needs)
    require_messages(body.get("messages", MISSING))
    return body


def parse_body(raw: bytes) -> MessagesRequest:
    """Parse and check the body's own fields; the messages themselves are checked by
    ``blocks.check_messages``. ``Uncompactable`` names what ctxproxy cannot model."""
    return check_body(load_body(raw), raw)


def check_body(body: dict[str, Any], raw: bytes) -> MessagesRequest:
    """The fields ctxproxy reads, checked (``Uncompactable`` naming the first it cannot read)."""
    check_field_types(body, FIELDS, Uncompactable)
    model = body.get("model")
    if not isinstance(model, str):
        raise Uncompactable("`model` is required: the name of the model to answer (a string).", param="model")
    max_tokens = body.get("max_tokens")
    _check_system(body.get("system"))
    _check_tools(body.get("tools"))
    user = _user_id(body.get("metadata"))
    messages = body["messages"]
    return MessagesRequest(body, raw, messages, model, body.get("stream") is True, user, max_tokens)


def _check_system(system: Any) -> None:
    if not isinstance(system, list):
        return
    check_blocks(system, "system")


def _check_tools(tools: Any) -> None:
    """Tools' names (ctxproxy's own tools must not clash with them) and types; their schemas are
    the upstream's to judge."""
    for i, tool in enumerate(tools or ()):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise Uncompactable(f"`{where}` must be a tool object, got {json_kind(tool)}.", param=where)
        if not isinstance(tool.get("name"), str):
            raise Uncompactable(
                f"`{where}.name` must be a string, got {json_kind(tool.get('name'))}.", param=f"{where}.name"
            )
        kind = tool.get("type")
        if kind is not None and not isinstance(kind, str):
            raise Uncompactable(f"`{where}.type` must be a string, got {json_kind(kind)}.", param=f"{where}.type")


def _user_id(metadata: Any) -> str | None:
    user = (metadata or {}).get("user_id")
    if user is not None and not isinstance(user, str):
        raise Uncompactable(f"`metadata.user_id` must be a string, got {json_kind(user)}.", param="metadata.user_id")
    return user

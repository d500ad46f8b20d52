"""Parsing and checking a Responses request body (``POST /v1/responses``) before anything is forwarded.

The body is hostile input, and ctxproxy is never stricter than the Responses API: a request the
API would take is never refused. Two levels, as for the other protocols:

* **Unreadable** (``BadRequest``, a 400): not a JSON object. Nothing can be done with it.
* **Not compactable** (``Uncompactable``: the pipeline forwards the client's bytes as sent, saying
  so in ``X-Ctx-Forwarded-As-Sent``): a field ctxproxy reads (:data:`FIELDS`, the tools' entries)
  or an item (``items.check_item``) in a form ctxproxy does not model; no ``input`` (a request
  made of a stored ``prompt`` alone); and a conversation whose history lives on the server
  (:data:`SERVER_STATE`: ``previous_response_id`` or ``conversation``): ctxproxy sees only the
  newest items, so it cannot compact what it cannot see. ``store: false`` with the whole history
  in ``input`` is how a client gets compaction.

Every other field is left to the upstream and forwarded untouched, unknown ones included. The
user whose memories a request reads is ``safety_identifier``, else the older ``user``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ctxproxy.errors import Uncompactable
from ctxproxy.pipeline.turn import Turn
from ctxproxy.wire.incremental import BodyLoader, convert_all
from ctxproxy.wire.json_body import FieldTypes, check_field_types, json_kind, load_object
from ctxproxy.wire.openai_responses.canonical import instructions_messages, item_messages, to_messages
from ctxproxy.wire.openai_responses.items import check_item

__all__ = ["FIELDS", "SERVER_STATE", "load_body", "parse_turn"]

# The fields ctxproxy reads, with their one JSON type (``null`` passes: "not sent").
FIELDS: FieldTypes = {
    "model": ((str,), "a string"),
    "stream": ((bool,), "true or false"),
    "instructions": ((str,), "a string"),
    "input": ((str, list), "a string or a list of input items"),
    "tools": ((list,), 'a list of tool objects ({"type": "function", "name": ...})'),
    "tool_choice": ((str, dict), '"none", "auto", "required" or an object naming a tool'),
    "max_output_tokens": ((int,), "an integer"),
    "user": ((str,), "a string"),
    "safety_identifier": ((str,), "a string"),
}
SERVER_STATE: Final = ("previous_response_id", "conversation")


def load_body(raw: bytes, load: BodyLoader | None = None) -> dict[str, Any]:
    """The body as a JSON object; ``BadRequest`` otherwise. ``load``: what parses the JSON
    (``ctxproxy.wire.incremental``), ``load_object`` when not given."""
    needs = "`model` and `input`"
    return load_object(raw, needs=needs) if load is None else load(raw, needs)


def parse_turn(raw: bytes, body: dict[str, Any] | None = None, load: BodyLoader | None = None) -> Turn:
    """Parse and check a Responses body (``body``: ``raw`` already parsed, by ``load`` when
    given: its items are then checked and converted from the previous body's conversion on);
    its conversation in ctxproxy's message model, or, when ctxproxy cannot model it, the reason
    (``Turn.as_sent``)."""
    body = load_body(raw, load) if body is None else body
    model = body.get("model")
    stream = body.get("stream") is True
    try:
        messages = _checked_messages(body, load)
    except Uncompactable as reason:
        return Turn(body, raw, [], model if isinstance(model, str) else None, stream, None, reason)
    user = body.get("safety_identifier") or body.get("user")
    return Turn(body, raw, messages, model, stream, user)


def _checked_messages(body: Mapping[str, Any], load: BodyLoader | None) -> list[dict[str, Any]]:
    """The body checked (in the order the reasons are told) and its canonical messages."""
    check_field_types(body, FIELDS, Uncompactable)
    for name in SERVER_STATE:
        if body.get(name) is not None:
            raise Uncompactable(
                f"`{name}` keeps the conversation on the server, where ctxproxy cannot see or compact it; "
                "send `store: false` with the whole history in `input` to have it compacted.",
                param=name,
            )
    source = body.get("input")
    if source is None or source == []:
        raise Uncompactable("`input` is missing or empty: there is no conversation to compact.", param="input")
    if isinstance(source, str):
        messages = to_messages(body)
    else:
        messages = instructions_messages(body) + convert_all(source, _checked, load, lookahead=True)
        last = source[-1]
        if isinstance(last, dict) and last.get("type") == "compaction_trigger":
            raise Uncompactable(
                "The last input item is a compaction_trigger: the upstream compacts this conversation itself.",
                param=f"input[{len(source) - 1}]",
            )
    for i, tool in enumerate(body.get("tools") or ()):
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise Uncompactable(f"`tools[{i}]` must be a tool object with a string `type`, got {json_kind(tool)}.",
                                param=f"tools[{i}]")  # fmt: skip
        named = tool.get("name")
        if named is not None and not isinstance(named, str):
            where = f"tools[{i}].name"
            raise Uncompactable(f"`{where}` must be a string, got {json_kind(named)}.", param=where)
    return messages


def _checked(items: Sequence[Any], i: int) -> list[dict[str, Any]]:
    """``items[i]`` checked, then converted (a previous body's conversion reuses both)."""
    check_item(items, i)
    return item_messages(items, i)

"""Parsing and checking a Gemini request body (``generateContent`` / ``streamGenerateContent``).

The body is hostile input, and ctxproxy is never stricter than the Gemini API: a request the API
would take is never refused. Two levels, as for the other protocols:

* **Unreadable** (``BadRequest``, a 400 in Google's error shape): not a JSON object.
* **Not compactable** (``Uncompactable``: forwarded as the client sent it, saying so in
  ``X-Ctx-Forwarded-As-Sent``): no ``contents``, or a field ctxproxy reads in a form it does not
  model — ``contents`` not a list of ``{role, parts}`` objects (role ``user``, ``model`` or none),
  a part that is not an object, ``systemInstruction`` not a ``{parts}`` object, ``tools`` not a
  list of objects, ``generationConfig`` not an object.

Every field is read under its camelCase or snake_case name (``fields``); every other field
(``toolConfig``, ``safetySettings``, ``cachedContent``, unknown ones) is left to the upstream
untouched. The model and whether the answer streams come from the path, not the body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxproxy.errors import Uncompactable
from ctxproxy.pipeline.turn import Turn
from ctxproxy.wire.gemini.canonical import MODEL, USER, contents_messages, system_messages
from ctxproxy.wire.gemini.fields import field, spelled
from ctxproxy.wire.incremental import BodyLoader, convert_all
from ctxproxy.wire.json_body import json_kind, load_object

__all__ = ["CONTENTS", "load_body", "parse_turn"]

CONTENTS = "contents"  # the key of the conversation array, spelled alike in camelCase and snake_case


def load_body(raw: bytes, load: BodyLoader | None = None) -> dict[str, Any]:
    """The body as a JSON object; ``BadRequest`` otherwise. ``load``: what parses the JSON
    (``ctxproxy.wire.incremental``, keyed on ``contents``), ``load_object`` when not given."""
    needs = "`contents`"
    return load_object(raw, needs=needs) if load is None else load(raw, needs)


def parse_turn(raw: bytes, model: str, stream: bool, load: BodyLoader | None = None) -> Turn:
    """Parse and check a body for ``model``; its conversation in ctxproxy's message model, or,
    when ctxproxy cannot model it, the reason (``Turn.as_sent``)."""
    body = load_body(raw, load)
    try:
        messages = _checked_contents(body, load)
        _check_fields(body)
    except Uncompactable as reason:
        return Turn(body, raw, [], model, stream, None, reason)
    return Turn(body, raw, system_messages(body) + messages, model, stream, None)


def _checked_contents(body: Mapping[str, Any], load: BodyLoader | None) -> list[dict[str, Any]]:
    """``contents``, each checked and converted (a previous body's conversion reuses both)."""
    contents = field(body, CONTENTS)
    where = spelled(body, CONTENTS) or CONTENTS
    if not isinstance(contents, list) or not contents:
        raise Uncompactable(f"`{where}` is missing or empty: there is no conversation to compact.", param=where)

    def checked(contents: Sequence[Any], at: int) -> list[dict[str, Any]]:
        _check_content(contents[at], f"{where}[{at}]")
        return contents_messages(contents, at)

    return convert_all(contents, checked, load)


def _check_fields(body: Mapping[str, Any]) -> None:
    system = field(body, "systemInstruction")
    if system is not None:
        _check_content(system, spelled(body, "systemInstruction") or "systemInstruction")
    tools = field(body, "tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise Uncompactable(f"`tools` must be a list of tool objects, got {json_kind(tools)}.", param="tools")
    config = field(body, "generationConfig")
    if config is not None and not isinstance(config, dict):
        raise Uncompactable(f"`generationConfig` must be an object, got {json_kind(config)}.", param="generationConfig")


def _check_content(content: Any, where: str) -> None:
    if not isinstance(content, dict):
        raise Uncompactable(f"`{where}` must be a content object ({{role, parts}}), got {json_kind(content)}.",
                            param=where)  # fmt: skip
    role = content.get("role")
    if role not in (None, "", USER, MODEL):
        raise Uncompactable(f"`{where}.role` is {role!r}; ctxproxy models the roles user and model.", param=where)
    parts = field(content, "parts")
    if not isinstance(parts, list) or not all(isinstance(part, dict) for part in parts):
        raise Uncompactable(f"`{where}.parts` must be a list of part objects.", param=f"{where}.parts")

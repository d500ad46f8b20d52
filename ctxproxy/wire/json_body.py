"""Reading a request body that should be a JSON object, for every protocol (pure).

The same first steps and the same error wording whatever the protocol: an empty body, bytes that
are not JSON, JSON that is not an object, a field whose JSON type is wrong (``null`` passes: "not
sent"), a required list that is missing or empty. Each protocol's own checks come after.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ctxproxy.errors import BadRequest

__all__ = ["MISSING", "FieldTypes", "check_field_types", "json_kind", "load_object", "require_messages"]

MISSING: Any = object()  # a field the body does not have (as opposed to one sent as null)

# field name -> (the Python types its JSON value may have, how an error message says so). Exact
# types: JSON true is not an integer.
FieldTypes = Mapping[str, tuple[tuple[type, ...], str]]


def load_object(raw: bytes, *, needs: str) -> dict[str, Any]:
    """``raw`` parsed as a JSON object; ``needs`` names what the object must hold, for the message
    about an empty body (e.g. "`model` and `messages`")."""
    if not raw.strip():
        raise BadRequest(f"The request body is empty; send a JSON object with {needs}.", code="invalid_json")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"The request body is not valid JSON: {exc}.", code="invalid_json") from None
    if not isinstance(body, dict):
        raise BadRequest(f"The request body must be a JSON object, got {json_kind(body)}.", code="invalid_body")
    return body


def check_field_types(body: Mapping[str, Any], fields: FieldTypes, error: type[BadRequest] = BadRequest) -> None:
    """Every field of ``fields`` that ``body`` has (and is not null) has one of its types; else
    ``error`` naming the first that has not."""
    for name, (types, wanted) in fields.items():
        value = body.get(name)
        if value is not None and type(value) not in types:
            raise error(f"`{name}` must be {wanted}, got {json_kind(value)}.", param=name)


def require_messages(value: Any) -> list[Any]:
    """``value``, the body's ``messages`` (:data:`MISSING` when absent), as a non-empty list."""
    if value is MISSING:
        raise BadRequest("`messages` is required: a list of {role, content} objects.", param="messages")
    if not isinstance(value, list):
        raise BadRequest(f"`messages` must be a list, got {json_kind(value)}.", param="messages")
    if not value:
        raise BadRequest("`messages` must contain at least one message.", param="messages")
    return value


def json_kind(value: Any) -> str:
    """How an error message names a JSON value's type ("a string", "null", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else type(value).__name__

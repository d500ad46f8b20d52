"""The Gemini API's field names, as a client may spell them.

Google's JSON mapping of protobuf accepts both a field's lowerCamelCase name and its proto
snake_case name, and clients send either: the ``google-genai`` SDK writes ``systemInstruction``
and ``generationConfig`` at the top but ``thinking_budget``, ``mime_type`` and
``parameters_json_schema`` inside them. ctxproxy reads a field under either spelling
(:func:`field`) and writes back whatever the client sent under its own spelling.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["field", "has_field", "snake", "spelled"]

_UPPER = re.compile(r"(?<!^)(?=[A-Z])")


def snake(name: str) -> str:
    """``systemInstruction`` → ``system_instruction``."""
    return _UPPER.sub("_", name).lower()


def spelled(obj: Mapping[str, Any], camel: str) -> str | None:
    """The spelling of ``camel`` that ``obj`` uses (camelCase first), or None."""
    if camel in obj:
        return camel
    other = snake(camel)
    return other if other in obj else None


def field(obj: Mapping[str, Any], camel: str) -> Any:
    """``obj``'s field ``camel`` under either spelling; None when it has neither."""
    name = spelled(obj, camel)
    return obj[name] if name is not None else None


def has_field(obj: Mapping[str, Any], camel: str) -> bool:
    return spelled(obj, camel) is not None

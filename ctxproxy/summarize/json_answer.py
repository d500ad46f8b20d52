"""A model's answer that should be one JSON value: read it, tolerating a fence or words around it. Pure."""

from __future__ import annotations

import re
from typing import Any

import orjson

from ctxproxy.upstream.completion import CallFailed

__all__ = ["json_object"]

_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```$", re.S)


def json_object(content: str) -> Any:
    """The JSON value of ``content`` — the whole text, a fenced block, or the outermost ``{…}``
    in it; ``CallFailed("not_json")`` when there is none."""
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text.startswith(("{", "[")):
        first, last = text.find("{"), text.rfind("}")
        if first < 0 or last <= first:
            raise CallFailed("not_json")
        text = text[first : last + 1]
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        raise CallFailed("not_json") from None

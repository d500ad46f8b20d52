"""A model's answer that should be one JSON value: read it, tolerating a fence or words around it,
and ask for one (``answer_json``) with every failure turned into ``None`` and a log line. Pure,
but for ``answer_json``'s call."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
import structlog

from ctxproxy.errors import UpstreamError
from ctxproxy.upstream.completion import CallFailed, CompletionClient, Prompt
from ctxproxy.upstream.port import transport_failure

__all__ = ["answer_json", "json_object"]

T = TypeVar("T")
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


async def answer_json(
    client: CompletionClient, prompt: Prompt, read: Callable[[Any], T], event: str, **fields: Any
) -> T | None:
    """``read`` of the JSON value the model answers ``prompt`` with (``read`` raises ``CallFailed``
    for one it cannot use); None on any failure — transport, timeout, status, not JSON, ``read``'s
    refusal, a bug — logged as ``event`` with the reason and ``fields``, never the text. Never
    raises, except ``asyncio.CancelledError``: the caller falls back to what needs no model."""
    details: dict[str, Any] = {}
    try:
        return read(json_object(await client.answer(prompt)))
    except CallFailed as failure:
        reason, details = failure.reason, failure.details
    except UpstreamError as error:
        reason, name = transport_failure(error)
        details = {"error": name} if reason == "transport" else {}
    except Exception as exc:  # a bug here must not cost what the caller does without the model
        reason, details = "error", {"error": type(exc).__name__}
    structlog.get_logger(__name__).warning(event, reason=reason, model=prompt.model, **fields, **details)
    return None

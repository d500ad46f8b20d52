"""Answering ``ctxproxy_retrieve(ref, query?)``: a tool output ctxproxy compressed or masked, back
whole, or only what matches ``query`` (``ctxproxy.tool_outputs.select``).

Where the original comes from is the caller's (``Originals``: the request's own messages, which
hold every result the client still sends, then the session's store). A bad ref, an unknown one
or a store failure is explained to the model, never an error of the request.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ctxproxy.tool_outputs import select

Originals = Callable[[str], Awaitable[str | None]]
"""A tool output's original text by its ref, None when the session has none of that ref."""


@dataclass(frozen=True)
class Retrieval:
    """What a request's ``ctxproxy_retrieve`` answers from, and whether the request offers the tool
    (it carries a compressed or masked output); a call is answered even when it was not offered
    this time (the tool stays offered in a session once it was, ``memory.pins``)."""

    originals: Originals
    offer: bool


REF: Final = re.compile(r"^r[0-9a-f]{16}$")
HEADER_TOKENS: Final = 24


async def answer_retrieve(
    arguments: Mapping[str, Any], originals: Originals | None, name: str, clip: Callable[[str, int], str], tokens: int
) -> str:
    ref = arguments.get("ref")
    if not isinstance(ref, str) or not REF.match(ref.strip()):
        return f'{name} needs "ref", the reference its [ctxproxy: …] line names: {{"ref": "r0123456789abcdef"}}.'
    ref = ref.strip()
    original = None if originals is None else await originals(ref)
    if original is None:
        return f"No tool output of this conversation has ref {ref} (or it is no longer kept); run the tool again."
    query = arguments.get("query")
    answer = select(original, query if isinstance(query, str) else None)
    return clip(answer, max(1, tokens - HEADER_TOKENS))

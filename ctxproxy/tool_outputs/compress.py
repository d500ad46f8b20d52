"""One tool result's text, compressed by its kind, with the line that says how to get it back.

``compress(text, tool)`` detects the kind (``detect``), runs that kind's compressor and, when the
result is at least ``MIN_SAVING`` smaller, returns it ending with one line: what was elided and
``ctxproxy_retrieve(ref=…)``. ``ref_of`` is the content hash the original is kept under, so the
same text has the same reference in every request and every session. Pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ctxproxy.tool_outputs import code, diffs, json_tree, listings, logs, text
from ctxproxy.tool_outputs.detect import Kind, detect
from ctxproxy.tool_outputs.shrunk import Shrunk

MIN_SAVING: Final = 0.3  # a compression that saves less than this share of the characters is not used
REF_PREFIX: Final = "r"

_COMPRESSORS: Final[dict[Kind, Callable[[str], Shrunk | None]]] = {
    Kind.JSON_ROWS: json_tree.compress,
    Kind.LOG: logs.compress,
    Kind.DIFF: diffs.compress,
    Kind.LISTING: listings.compress,
    Kind.CODE: code.compress,
    Kind.TEXT: text.compress,
}


@dataclass(frozen=True)
class Compressed:
    kind: Kind
    text: str  # the compressed text, its retrieval line last


def ref_of(text: str) -> str:
    """The reference of a result's text: a hash of its content (``r`` and 16 hex digits)."""
    return REF_PREFIX + hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def retrieve_line(elided: str, ref: str, tool: str) -> str:
    return f'[ctxproxy: {elided}. {tool}(ref="{ref}") returns the whole output; add query="…" for only what matches.]'


def compress(original: str, tool: str) -> Compressed | None:
    """``original`` compressed by its kind, or None (not its kind, or not worth it). ``tool``: the
    name the model calls ``ctxproxy_retrieve`` by."""
    kind = detect(original)
    shrunk = _COMPRESSORS[kind](original)
    if shrunk is None:
        return None
    out = f"{shrunk.text.rstrip()}\n{retrieve_line(shrunk.elided, ref_of(original), tool)}"
    if len(out) > (1 - MIN_SAVING) * len(original):
        return None
    return Compressed(kind, out)

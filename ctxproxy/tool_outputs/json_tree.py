"""JSON holding arrays of objects, at the top or nested (a conversation's sessions of turns, an
API answer with its items and paging), as its outline with each array's rows. Pure.

A top-level array of objects is written as ``json_rows`` writes rows: a table when its rows are
a few short scalars, else its schema and the rows worth showing. Any other object or array is
written as its outline, one line per member, indented by depth: a scalar as its value (a long
string shortened as a whole value), an array of objects as its row count and ``json_rows.block``
(its schema, anomalous rows, first, last and spread rows up to a share of its size, so every
array keeps rows in proportion), an object or array that holds such arrays opened in turn. Keys
are written as JSON strings; nothing is cut inside a string. JSON with no array of objects in it
is not this kind (``has_rows``), nor arrays nested deeper than ``MAX_DEPTH``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from ctxproxy.tool_outputs import json_rows
from ctxproxy.tool_outputs.json_rows import Row, is_rows
from ctxproxy.tool_outputs.shrunk import Shrunk, plural

MAX_DEPTH: Final = 32  # arrays of objects nested deeper are not looked for (a hostile nesting costs nothing)


def has_rows(value: Any) -> bool:
    """Whether a parsed JSON value is, or holds at any depth, an array of objects."""
    return next(row_arrays(value), None) is not None


def row_arrays(value: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, Sequence[Row]]]:
    """Every array of objects in a parsed JSON value down to ``MAX_DEPTH``, in document order,
    with its path (``sessions[2].turns``; empty for the value itself); rows are not looked into."""
    if is_rows(value):
        yield path, value
    elif depth >= MAX_DEPTH:
        return
    elif isinstance(value, dict):
        for key, member in value.items():
            yield from row_arrays(member, f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(value, list):
        for i, member in enumerate(value):
            yield from row_arrays(member, f"{path}[{i}]", depth + 1)


@dataclass
class _Outline:
    lines: list[str]
    arrays: int = 0
    rows: int = 0
    shown: int = 0
    fields: str = ""  # the field list of the array written last


def compress(text: str) -> Shrunk | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if is_rows(value):
        return json_rows.table(value, len(text)) or _rows(value)
    if not has_rows(value):
        return None
    outline = _Outline([f"JSON {json_rows.type_of(value)}, as its outline:"])
    _members(value, "", outline)
    elided = f"{json_rows.elided(outline.rows, outline.shown)} in {plural(outline.arrays, 'array')} of objects"
    return Shrunk("\n".join(outline.lines), elided + "; long values shortened")


def _rows(rows: Sequence[Row]) -> Shrunk:
    lines, shown, _ = json_rows.block(rows)
    return Shrunk("\n".join([f"JSON array of {len(rows)} objects.", *lines]), json_rows.elided(len(rows), shown))


def _members(value: Any, indent: str, outline: _Outline) -> None:
    items = value.items() if isinstance(value, dict) else ((f"[{i}]", v) for i, v in enumerate(value))
    for key, member in items:
        label = orjson.dumps(key).decode() if isinstance(value, dict) else key
        if is_rows(member):
            outline.lines.append(f"{indent}{label}: array of {len(member)} objects")
            lines, shown, outline.fields = json_rows.block(member, indent + "  ", outline.fields)
            outline.lines.extend(lines)
            outline.arrays, outline.rows, outline.shown = (
                outline.arrays + 1,
                outline.rows + len(member),
                outline.shown + shown,
            )
        elif isinstance(member, dict | list) and has_rows(member):
            outline.lines.append(f"{indent}{label}: {json_rows.type_of(member)} of {len(member)}")
            _members(member, indent + "  ", outline)
        else:
            outline.lines.append(f"{indent}{label}: {orjson.dumps(json_rows.short(member)).decode()}")

"""An array of JSON objects (rows), as its schema and the rows worth showing. Pure.

Rows of a few short scalars (``pip list``) are kept whole, as a table, when that at least halves
them (``table``). Otherwise (``block``): the row count; each field with its types; the distinct
values of low-cardinality fields with their counts; every anomalous row (an error, failure or
exception, an HTTP status outside 2xx, a null where most rows have a value), at most
``MAX_ANOMALIES``; the first and last rows, and rows spread evenly across the array up to
``ROW_SHARE`` of its size. Rows are written as compact JSON, whole (a long string value is
shortened as a whole value and says its length): nothing is cut inside a string.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from ctxproxy.tool_outputs.shrunk import Shrunk, plural

MIN_ROWS: Final = 3
MAX_ANOMALIES: Final = 20
ROW_SHARE: Final = 0.2  # rows shown, first, last and spread across, up to this share of the array's size
LOW_CARDINALITY: Final = 8  # a field with at most this many distinct values has them listed
TABLE_FIELDS: Final = 3  # rows of at most this many fields may be shown whole, as a table
TABLE_SHARE: Final = 0.5  # the table is used when it at least halves the original (a version must stay findable)
LONG_VALUE: Final = 300  # characters of a string value shown in a row
_FAILURE: Final = re.compile(r"\b(?:error|errors|fail|failed|failure|exception|traceback|fatal|panic)\b", re.I)
_STATUS_KEYS: Final = frozenset({"status", "status_code", "statuscode", "http_status", "code"})

Row = Mapping[str, Any]


def rows_of(value: Any) -> tuple[str | None, Sequence[Row]] | None:
    """The rows of a parsed JSON value: a list of objects, or the one list of objects an object
    holds (its key given); None when it has no such rows."""
    if is_rows(value):
        return None, value
    if isinstance(value, dict):
        lists = [(k, v) for k, v in value.items() if is_rows(v)]
        if len(lists) == 1:
            return lists[0]
    return None


def is_rows(value: Any) -> bool:
    return isinstance(value, list) and len(value) >= MIN_ROWS and all(isinstance(v, dict) for v in value)


def block(rows: Sequence[Row], indent: str = "", fields_above: str = "") -> tuple[list[str], int, str]:
    """The lines showing ``rows`` under a header the caller writes, each starting with ``indent``;
    how many rows they show; their field list. ``fields_above``: the field list of the array
    written before, not repeated when it is the same."""
    fields = _fields(rows)
    listed = ", ".join(f"{name} ({'|'.join(sorted(types))})" for name, types in fields.items())
    lines = [f"{indent}Fields: {listed if listed != fields_above else 'as above'}"]
    lines.extend(indent + line for line in _low_cardinality(rows, fields))
    anomalous = [i for i, row in enumerate(rows) if _anomalous(row, fields, len(rows))]
    if anomalous:
        lines.append(f"{indent}Anomalous rows ({len(anomalous)}):")
        lines.extend(indent + _row(i, rows[i]) for i in anomalous[:MAX_ANOMALIES])
        if len(anomalous) > MAX_ANOMALIES:
            lines.append(f"{indent}  … {len(anomalous) - MAX_ANOMALIES} more anomalous rows")
    shown = _spread(rows, set(anomalous[:MAX_ANOMALIES]))
    lines.append(f"{indent}Rows:")
    lines.extend(indent + _row(i, rows[i]) for i in shown)
    return lines, len(shown) + min(len(anomalous), MAX_ANOMALIES), listed


def _spread(rows: Sequence[Row], anomalous: set[int]) -> list[int]:
    """The first and the last row and rows evenly spread between them, while the rows shown
    (the anomalous ones counted, as ``_row`` writes them) stay within ``ROW_SHARE`` of the
    array's size; in order, the anomalous ones (shown apart) left out."""
    full = sum(len(orjson.dumps(row)) for row in rows)
    sizes = [len(_row(i, row)) for i, row in enumerate(rows)]
    taken = anomalous | {0, len(rows) - 1}
    room = ROW_SHARE * full - sum(sizes[i] for i in taken)
    more = max(0, min(len(rows) - len(taken), int(room * len(rows) / sum(sizes))))
    step = (len(rows) - 1) / (more + 1)
    return sorted(({0, len(rows) - 1} | {round(k * step) for k in range(1, more + 1)}) - anomalous)


def table(rows: Sequence[Row], size: int) -> Shrunk | None:
    """Rows of a few short scalars (``pip list``) as a table of every row, one line each, when that
    is at most ``TABLE_SHARE`` of the original: nothing is elided but the JSON's punctuation.
    Cells are separated by a space when no cell is empty or holds one, else by `` | ``."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    if len(names) > TABLE_FIELDS:
        return None
    if not all(isinstance(v, str | int | float | bool) or v is None for row in rows for v in row.values()):
        return None
    cells = [_table_row(row, names) for row in rows]
    plain = all(cell and not any(c.isspace() for c in cell) for line in [names, *cells] for cell in line)
    sep = " " if plain else " | "
    lines = [f"JSON array of {len(rows)} objects, one per line: " + sep.join(names)]
    lines.extend(sep.join(line) for line in cells)
    out = "\n".join(lines)
    if len(out) > TABLE_SHARE * size or any(sep in cell for line in cells for cell in line):
        return None  # too long, or a value holds the separator
    return Shrunk(out, "only the JSON punctuation elided")


def elided(total: int, shown: int) -> str:
    return f"{plural(total - shown, 'row')} of {total} elided"


def _table_row(row: Row, names: Sequence[str]) -> list[str]:
    """One row's cells in the table's order; the fields it lacks at the end left out."""
    cells = [_cell(row[name]) if name in row else "" for name in names]
    while cells and cells[-1] == "" and names[len(cells) - 1] not in row:
        cells.pop()
    return cells


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _fields(rows: Sequence[Row]) -> dict[str, dict[str, int]]:
    """Each field's types, with how many rows have it non-null."""
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        for name, value in row.items():
            types = out.setdefault(str(name), {})
            kind = type_of(value)
            types[kind] = types.get(kind, 0) + 1
    return out


def type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "str"
    return "array" if isinstance(value, list) else "object"


def _low_cardinality(rows: Sequence[Row], fields: Mapping[str, Mapping[str, int]]) -> list[str]:
    if len(rows) < 2 * LOW_CARDINALITY:
        return []
    lines = []
    for name, types in fields.items():
        if not set(types) <= {"str", "number", "bool", "null"}:
            continue
        counts = Counter(_scalar(row.get(name)) for row in rows if name in row)
        if 1 < len(counts) <= min(LOW_CARDINALITY, sum(counts.values()) // 2):  # values that repeat
            values = ", ".join(f"{value} ({n})" for value, n in sorted(counts.items(), key=lambda c: (-c[1], c[0])))
            lines.append(f"Values of {name}: {values}")
    return lines


def _scalar(value: Any) -> str:
    return orjson.dumps(value).decode()


def _anomalous(row: Row, fields: Mapping[str, Mapping[str, int]], total: int) -> bool:
    for name, value in row.items():
        if isinstance(value, str) and _FAILURE.search(value):
            return True
        if value not in (None, False, 0, "", [], {}) and _FAILURE.search(str(name)):
            return True
        if str(name).lower() in _STATUS_KEYS and isinstance(value, int) and 300 <= value <= 599:
            return True
        if value is None and total - fields[str(name)].get("null", 0) >= 0.8 * total:
            return True
    return False


def _row(index: int, row: Row) -> str:
    shown = {k: short(v) for k, v in row.items()}
    return f"  [{index}] {orjson.dumps(shown).decode()}"


def short(value: Any) -> Any:
    """A value as a row shows it: a long string or container shortened as a whole value."""
    if isinstance(value, str) and len(value) > LONG_VALUE:
        return f"{value[:LONG_VALUE]}… ({len(value)} chars)"
    if isinstance(value, list | dict):
        dumped = orjson.dumps(value).decode()
        if len(dumped) > LONG_VALUE:
            return f"<{type_of(value)} of {len(value)}, {len(dumped)} chars>"
    return value

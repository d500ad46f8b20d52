"""A retrieval's answer: the original output, or only what matches a query. Pure.

The query's words are matched case-insensitively. JSON rows (every array of objects in the
output, ``json_tree.row_arrays``) are kept whole: the rows that contain the most of the words,
each with its path. Any other text by lines: the lines with the most of the
words, each with ``BEFORE`` lines before and ``AFTER`` after, numbered, gaps marked.
"""

from __future__ import annotations

import re
from typing import Final

import orjson

from ctxproxy.tool_outputs.json_tree import row_arrays

BEFORE: Final = 2
AFTER: Final = 6


def select(original: str, query: str | None) -> str:
    words = _words(query)
    if not words:
        return original
    rows = _rows(original)
    if rows is not None:
        return _select_rows(rows, words, query or "")
    lines = original.splitlines()
    best = _best([line.lower() for line in lines], words)
    if not best:
        return f"Nothing in the output matches {query!r}; call again without query for all {len(lines)} lines."
    keep = sorted({j for i in best for j in range(max(0, i - BEFORE), min(len(lines), i + AFTER + 1))})
    out = [f"{len(best)} of {len(lines)} lines match {query!r} (shown with their neighbours, numbered):"]
    previous = -1
    for i in keep:
        if i > previous + 1:
            out.append("…")
        out.append(f"{i + 1}: {lines[i]}")
        previous = i
    return "\n".join(out)


def _words(query: str | None) -> list[str]:
    return sorted({w for w in re.split(r"[\s,;]+", (query or "").lower()) if w})


def _rows(original: str) -> list[tuple[str, str]] | None:
    """Every row of every array of objects in a JSON output, as its path and compact JSON."""
    stripped = original.strip()
    if stripped[:1] not in ("[", "{"):
        return None
    try:
        found = [
            (f"{path}[{i}]", orjson.dumps(row).decode())
            for path, rows in row_arrays(orjson.loads(stripped))
            for i, row in enumerate(rows)
        ]
    except orjson.JSONDecodeError:
        return None
    return found or None


def _select_rows(rows: list[tuple[str, str]], words: list[str], query: str) -> str:
    best = _best([row.lower() for _, row in rows], words)
    if not best:
        return f"No row of the {len(rows)} matches {query!r}; call again without query for all of them."
    shown = [f"{rows[i][0]} {rows[i][1]}" for i in best]
    return "\n".join([f"{len(best)} of {len(rows)} rows match {query!r}:", *shown])


def _best(texts: list[str], words: list[str]) -> list[int]:
    """The indices of the texts that contain the most of ``words`` (at least one)."""
    scores = [sum(1 for w in words if w in text) for text in texts]
    top = max(scores, default=0)
    return [i for i, s in enumerate(scores) if s == top] if top else []

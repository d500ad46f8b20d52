"""Source code (a file read, with or without line numbers): its signatures with their line
numbers and the first line of each docstring; bodies elided. Pure; whole lines only.

Kept: imports (a count and the first few), every line that opens a definition (``def``,
``class``, ``function``, ``fn``, ``func``, ``struct``, ``interface`` …, and the decorators right
before one) with its continuation lines and the docstring's or comment's first line after it,
each prefixed by its line number (the file's own when the text carries them).
"""

from __future__ import annotations

import re
from typing import Final

from ctxproxy.tool_outputs.detect import SIGNATURE
from ctxproxy.tool_outputs.shrunk import Shrunk, plural

MIN_LINES: Final = 30
IMPORTS_SHOWN: Final = 5
SIGNATURE_LINES: Final = 6  # a signature continues over at most this many lines
_NUMBERED: Final = re.compile(r"^\s*(\d+)[\t:|](.*)$")
_IMPORT: Final = re.compile(r"^\s*(?:import |from \S+ import |#include|use |require\()")
_DOC: Final = re.compile(r'^\s*(?:"""|\'\'\'|//|#(?!include)|/\*\*?|\*)\s*\S')
_DECORATOR: Final = re.compile(r"^\s*@\w")

Line = tuple[int, str]  # its number, its text


def numbered_lines(text: str) -> list[Line]:
    """The text's lines with their numbers: the ones it carries (``cat -n``, ``nl``), else 1, 2, …"""
    raw = text.splitlines()
    found = [_NUMBERED.match(line) for line in raw]
    if sum(1 for m in found if m) < 0.9 * len(raw):
        return [(i + 1, line) for i, line in enumerate(raw)]
    return [
        (int(m.group(1)), m.group(2)) if m else (i + 1, line)
        for i, (line, m) in enumerate(zip(raw, found, strict=True))
    ]


def compress(text: str) -> Shrunk | None:
    lines = numbered_lines(text)
    if len(lines) < MIN_LINES:
        return None
    imports = [i for i, (_, line) in enumerate(lines) if _IMPORT.match(line)]
    kept: set[int] = set(imports[:IMPORTS_SHOWN])
    definitions = 0
    for i, (_, line) in enumerate(lines):
        if i in kept or _IMPORT.match(line) or not SIGNATURE.match(line):
            continue
        definitions += 1
        start = i
        while start > 0 and start - 1 not in kept and _DECORATOR.match(lines[start - 1][1]):
            start -= 1
        kept.update(range(start, i))
        kept.update(_signature(lines, i))
    if definitions == 0:
        return None
    out = [
        f"{plural(len(imports), 'import')}" + (f", the first {IMPORTS_SHOWN}" if len(imports) > IMPORTS_SHOWN else "")
    ]
    out.extend(f"{lines[i][0]}: {lines[i][1]}" for i in sorted(kept))
    elided = f"bodies elided: {len(kept)} of {len(lines)} lines kept ({plural(definitions, 'definition')})"
    return Shrunk("\n".join(out), elided)


def _signature(lines: list[Line], start: int) -> list[int]:
    """The definition's lines from ``start`` to the one that ends its signature (``:``, ``{`` …),
    and its docstring's first line."""
    out: list[int] = []
    i = start
    while i < len(lines) and len(out) < SIGNATURE_LINES:
        out.append(i)
        i += 1
        if lines[i - 1][1].rstrip().endswith((":", "{", ";", ")", "=>")):
            break
    if i < len(lines) and _DOC.match(lines[i][1]):
        out.append(i)
    return out

"""Plain text, extractive: the opening lines, every line that reports a problem or a number
worth keeping, and the closing lines. Pure; whole lines only."""

from __future__ import annotations

from typing import Final

from ctxproxy.tool_outputs.logs import IMPORTANT
from ctxproxy.tool_outputs.shrunk import Shrunk

HEAD: Final = 15
TAIL: Final = 8
MAX_MIDDLE: Final = 25
MIN_LINES: Final = HEAD + TAIL + 10


def compress(text: str) -> Shrunk | None:
    lines = text.splitlines()
    if len(lines) < MIN_LINES:
        return None
    middle = [i for i in range(HEAD, len(lines) - TAIL) if IMPORTANT.search(lines[i])][:MAX_MIDDLE]
    keep = [*range(HEAD), *middle, *range(len(lines) - TAIL, len(lines))]
    out: list[str] = []
    previous = -1
    for i in keep:
        if i > previous + 1:
            out.append(f"… {i - previous - 1} lines elided")
        out.append(lines[i])
        previous = i
    return Shrunk("\n".join(out), f"{len(lines) - len(keep)} of {len(lines)} lines elided")

"""``git log`` output (with or without ``--stat``): each commit as its hash, its subject and the
first files it changed (and how many more); authors, dates, message bodies, the stat graphs and
line counts elided. Pure; a text that is not a run of ``commit <hash>`` records is left to the log
compressor.
"""

from __future__ import annotations

import re
from typing import Final

from ctxproxy.tool_outputs.shrunk import Shrunk, plural

COMMIT: Final = re.compile(r"^commit ([0-9a-f]{7,40})\b")
STAT: Final = re.compile(r"^ (\S.*?)\s+\|\s+(?:\d+|Bin)")
MIN_COMMITS: Final = 3
HASH_CHARS: Final = 12
FILES_SHOWN: Final = 4  # a commit's first files, then how many more


def compress(text: str) -> Shrunk | None:
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if COMMIT.match(line)]
    if len(starts) < MIN_COMMITS or starts[0] > 2:
        return None
    out = []
    for start, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        out.extend(_commit(lines[start:end]))
    elided = f"authors, dates, message bodies and stat graphs of {plural(len(starts), 'commit')} elided"
    return Shrunk("\n".join(out), elided)


def _commit(lines: list[str]) -> list[str]:
    match = COMMIT.match(lines[0])
    assert match is not None
    message = [line.strip() for line in lines[1:] if line.startswith("    ") and line.strip()]
    subject = message[0] if message else ""
    files = [m.group(1) for line in lines if (m := STAT.match(line))]
    out = [f"{match.group(1)[:HASH_CHARS]} {subject}"]
    if files:
        more = f", and {len(files) - FILES_SHOWN} more" if len(files) > FILES_SHOWN else ""
        out.append(f"  {plural(len(files), 'file')}: {', '.join(files[:FILES_SHOWN])}{more}")
    return out

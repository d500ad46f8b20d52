"""A unified diff: every file and hunk header, the changed lines (the first ``HUNK_LINES`` of each
hunk), context cut; a list of the files with their added and removed counts first. Pure.

A hunk is read by the line counts of its header, so a removed line that reads ``--- x`` is still a
removed line. Headers and changed lines are kept or dropped whole, never cut; a text whose hunks
do not parse (a ``@@`` line without its ranges, text before the first file) is left as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from ctxproxy.tool_outputs.shrunk import Shrunk, plural

HUNK_LINES: Final = 8
HUNK_HEADER: Final = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass
class _File:
    name: str
    added: int = 0
    removed: int = 0
    lines: list[str] = field(default_factory=list)


@dataclass
class _Reader:
    files: list[_File] = field(default_factory=list)
    old: int = 0  # lines of the current hunk still to come, on each side
    new: int = 0
    shown: int = 0  # changed lines of the current hunk kept
    elided: int = 0

    def line(self, line: str) -> bool:
        """Take one line; False when the text is not a diff."""
        if self.old > 0 or self.new > 0:
            self._hunk_line(line)
            return True
        if line.startswith("@@"):
            header = HUNK_HEADER.match(line)
            if header is None or not self.files:
                return False
            self.old = int(header.group(1) or 1)
            self.new = int(header.group(2) or 1)
            self.shown = 0
            self.files[-1].lines.append(line)
            return True
        if line.startswith("diff ") or (line.startswith("--- ") and (not self.files or _opened(self.files[-1]))):
            self.files.append(_File(_name(line)))
        if not self.files:
            return not line.strip()  # blank lines before the first file; anything else: not a diff
        self.files[-1].lines.append(line)
        if line.startswith("+++ ") and _name(line) != "/dev/null":
            self.files[-1].name = _name(line)
        return True

    def _hunk_line(self, line: str) -> None:
        sign = line[:1]
        if sign == "\\":  # "\ No newline at end of file"
            self.elided += 1
            return
        self.old -= sign in ("-", " ", "")
        self.new -= sign in ("+", " ", "")
        current = self.files[-1]
        if sign not in ("+", "-"):
            self.elided += 1
            return
        current.added += sign == "+"
        current.removed += sign == "-"
        self.shown += 1
        if self.shown <= HUNK_LINES:
            current.lines.append(line)
            return
        self.elided += 1
        if self.shown == HUNK_LINES + 1:
            current.lines.append("…")


def _opened(file: _File) -> bool:
    """Whether a file's ``---`` header was already read (another ``---`` then begins a new file)."""
    return any(line.startswith("--- ") for line in file.lines)


def compress(text: str) -> Shrunk | None:
    reader = _Reader()
    lines = text.splitlines()
    for line in lines:
        if not reader.line(line):
            return None
    files = reader.files
    if not files or not any(line.startswith("@@") for f in files for line in f.lines):
        return None
    summary = [f"{plural(len(files), 'file')} changed:"]
    summary.extend(f"  {f.name} (+{f.added} -{f.removed})" for f in files)
    body = [line for f in files for line in f.lines]
    elided = f"{reader.elided} of {len(lines)} diff lines elided (context, long hunks' tails)"
    return Shrunk("\n".join([*summary, *body]), elided)


def _name(line: str) -> str:
    if line.startswith("diff --git "):
        parts = line.split(" b/", 1)
        return parts[1] if len(parts) == 2 else line[len("diff --git ") :]
    path = line[4:].split("\t", 1)[0] if line.startswith(("--- ", "+++ ")) else line
    return path[2:] if path.startswith(("a/", "b/")) else path

"""A unified diff: every file and hunk header, the changed lines, context cut; a list of the files
with their added and removed counts first. Pure.

Every hunk keeps its first changed lines, as many in each (at least ``HUNK_LINES``) as fit in
``CHANGED_SHARE`` of the diff: short hunks whole, long ones cut at the same depth.

A hunk is read by the line counts of its header, so a removed line that reads ``--- x`` is still a
removed line. Headers and changed lines are kept or dropped whole, never cut; a text whose hunks
do not parse (a ``@@`` line without its ranges, text before the first file) is left as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from ctxproxy.tool_outputs.shrunk import Shrunk, plural

HUNK_LINES: Final = 8  # changed lines every hunk keeps
CHANGED_SHARE: Final = 0.3  # more changed lines a hunk, while all those kept stay within this share of the diff
HUNK_HEADER: Final = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass
class _File:
    name: str
    added: int = 0
    removed: int = 0
    lines: list[str | list[str]] = field(default_factory=list)  # headers, and each hunk's changed lines


@dataclass
class _Reader:
    files: list[_File] = field(default_factory=list)
    old: int = 0  # lines of the current hunk still to come, on each side
    new: int = 0
    elided: int = 0  # context and "no newline" lines

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
            self.files[-1].lines.extend([line, []])
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
        hunk = current.lines[-1]
        assert isinstance(hunk, list)
        hunk.append(line)


def _opened(file: _File) -> bool:
    """Whether a file's ``---`` header was already read (another ``---`` then begins a new file)."""
    return any(isinstance(line, str) and line.startswith("--- ") for line in file.lines)


def compress(text: str) -> Shrunk | None:
    reader = _Reader()
    lines = text.splitlines()
    for line in lines:
        if not reader.line(line):
            return None
    files = reader.files
    hunks = [item for f in files for item in f.lines if isinstance(item, list)]
    if not hunks:
        return None
    depth = _depth(hunks, CHANGED_SHARE * len(text))
    summary = [f"{plural(len(files), 'file')} changed:"]
    summary.extend(f"  {f.name} (+{f.added} -{f.removed})" for f in files)
    body = [line for f in files for item in f.lines for line in _shown(item, depth)]
    cut = sum(max(0, len(hunk) - depth) for hunk in hunks)
    elided = f"{reader.elided + cut} of {len(lines)} diff lines elided (context, long hunks' tails)"
    return Shrunk("\n".join([*summary, *body]), elided)


def _depth(hunks: list[list[str]], budget: float) -> int:
    """How many changed lines each hunk keeps: ``HUNK_LINES``, or more while every hunk's first
    lines together stay within ``budget`` characters."""
    depth = HUNK_LINES
    spent = sum(len(line) + 1 for hunk in hunks for line in hunk[:depth])
    longer = [hunk for hunk in hunks if len(hunk) > depth]
    while longer:
        step = sum(len(hunk[depth]) + 1 for hunk in longer)
        if spent + step > budget:
            break
        spent, depth = spent + step, depth + 1
        longer = [hunk for hunk in longer if len(hunk) > depth]
    return depth


def _shown(item: str | list[str], depth: int) -> list[str]:
    if isinstance(item, str):
        return [item]
    return item if len(item) <= depth else [*item[:depth], "…"]


def _name(line: str) -> str:
    if line.startswith("diff --git "):
        parts = line.split(" b/", 1)
        return parts[1] if len(parts) == 2 else line[len("diff --git ") :]
    path = line[4:].split("\t", 1)[0] if line.startswith(("--- ", "+++ ")) else line
    return path[2:] if path.startswith(("a/", "b/")) else path

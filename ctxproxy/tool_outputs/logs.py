"""A log or a test run: its first and last lines, every error, warning and failure line with its
neighbours, runs of repeated lines collapsed with their count. Pure; whole lines only.

Lines are "the same" when they differ only in numbers (timestamps, durations, counters), so a
retry loop's hundred lines become one line and ``(×100)``. What is dropped is counted by its
verdict word (PASSED, ok …), so the elision line still says how the run went, and the passing
tests among them are named under their file when that stays short (``verdicts``). A ``git log``
keeps each commit's hash, subject and files (``history``).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Final

from ctxproxy.tool_outputs import history, verdicts
from ctxproxy.tool_outputs.shrunk import Shrunk, plural

HEAD: Final = 8
TAIL: Final = 12
NEIGHBOURS: Final = 2
MAX_IMPORTANT: Final = 60  # important lines kept; the rest are counted
MIN_LINES: Final = HEAD + TAIL + 5
IMPORTANT: Final = re.compile(
    r"\b(?:ERROR|ERRORS|FAIL|FAILED|FAILURE|FAILURES|FATAL|CRITICAL|WARN|WARNING|PANIC|Traceback|Exception|"
    r"error|failed|failure|fatal|panic|exception|assert|AssertionError|Error)\b|^E  |^\s*raise "
)
VERDICT: Final = re.compile(r"\b(PASSED|SKIPPED|XFAIL|XPASS|DEBUG|INFO|TRACE|ok)\b")
_NUMBERS: Final = re.compile(r"\d+")


def compress(text: str) -> Shrunk | None:
    """A ``git log`` as its commits (``history``); any other log by lines."""
    commits = history.compress(text)
    if commits is not None:
        return commits
    lines = text.splitlines()
    if len(lines) < MIN_LINES:
        return None
    keep = set(range(HEAD)) | set(range(len(lines) - TAIL, len(lines)))
    important = [i for i, line in enumerate(lines) if IMPORTANT.search(line)]
    for i in important[:MAX_IMPORTANT]:
        keep.update(range(max(0, i - NEIGHBOURS), min(len(lines), i + NEIGHBOURS + 1)))
    out: list[str | list[str]] = []  # kept lines, and runs of elided lines
    i = 0
    while i < len(lines):
        j = i + 1
        if i not in keep:
            while j < len(lines) and j not in keep:
                j += 1
            out.append(lines[i:j])
        else:
            while j < len(lines) and j in keep and _shape(lines[j]) == _shape(lines[i]):
                j += 1
            out.append(lines[i] if j - i == 1 else f"{lines[i]}  (×{j - i}, differing only in numbers)")
        i = j
    more = len(important) - MAX_IMPORTANT
    note = f"; {more} more error/warning lines not shown" if more > 0 else ""
    return Shrunk("\n".join(_written(out, len(text))), f"{len(lines) - len(keep)} of {len(lines)} lines elided{note}")


def _written(out: list[str | list[str]], size: int) -> list[str]:
    """The kept lines, and each elided run as its count by verdict and its passing tests' names."""
    runs = [item for item in out if isinstance(item, list)]
    named = iter(verdicts.names(runs, size))
    written: list[str] = []
    for item in out:
        if isinstance(item, str):
            written.append(item)
            continue
        tests = next(named)
        written.append(
            f"… {plural(len(item), 'line')} elided{_verdicts(item)}{', their tests by file:' if tests else ''}"
        )
        written.extend(tests)
    return written


def _shape(line: str) -> str:
    return _NUMBERS.sub("#", line)


def _verdicts(lines: list[str]) -> str:
    counts = Counter(m.group(1) for line in lines if (m := VERDICT.search(line)))
    if not counts:
        return ""
    return " (" + ", ".join(f"{n} {word}" for word, n in counts.most_common(4)) + ")"

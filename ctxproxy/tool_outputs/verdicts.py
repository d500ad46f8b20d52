"""The passing tests of a test run's verdict lines, by name, grouped by file. Pure.

A log compressor elides runs of passing verdicts (``pytest -v``'s ``path::name PASSED [ 40%]``,
``cargo test``'s ``test mod::name ... ok``, ``go test -v``'s ``--- PASS: TestName (0.01s)``,
``unittest -v``'s ``test_name (module.Class) ... ok``) and counts them; ``names`` says which
tests they were: under each elided run, one line per file with its passing tests' names. The
names are written whole when all of them fit in ``NAMES_SHARE`` of the log; else the cases of
a parametrized test after its first are written as their parameters only (``test_x[a], [b]``);
else not at all (the counts stay).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

NAMES_SHARE: Final = 0.25  # the names written under elided runs, at most this share of the log's characters
_PASSING: Final = (
    re.compile(r"^(?P<file>[^\s:]*)::(?P<name>\S.*?) PASSED(?:\s+\[\s*\d+%\])?\s*$"),  # pytest -v
    re.compile(r"^test (?P<file>\S+::)?(?P<name>\S+) \.\.\. ok$"),  # cargo test
    re.compile(r"^\s*--- PASS: (?P<name>\S+) \([\d.]+s\)$"),  # go test -v
    re.compile(r"^(?P<name>\w+) \((?P<file>[\w.]+)\)(?: \S.*)? \.\.\. ok$"),  # unittest -v
)
_PARAMETRIZED: Final = re.compile(r"^(?P<function>[^\[]+)(?P<cases>\[.*\])$")


def passing(line: str) -> tuple[str, str] | None:
    """A passing verdict line's file (``""`` when the line names none) and test name."""
    for pattern in _PASSING:
        found = pattern.match(line)
        if found is not None:
            return (found.groupdict().get("file") or "").rstrip(":"), found.group("name")
    return None


def names(runs: Sequence[Sequence[str]], size: int) -> list[list[str]]:
    """For each run of elided lines, the lines naming its passing tests by file: whole names when
    every run's fit in ``NAMES_SHARE`` of ``size``, else parametrized cases shortened, else none."""
    found = [_by_file(run) for run in runs]
    for compact in (False, True):
        written = [[_file_line(file, tests, compact) for file, tests in files.items()] for files in found]
        if sum(len(line) + 1 for lines in written for line in lines) <= NAMES_SHARE * size:
            return written
    return [[] for _ in runs]


def _by_file(run: Sequence[str]) -> dict[str, list[str]]:
    files: dict[str, list[str]] = {}
    for line in run:
        test = passing(line)
        if test is not None:
            files.setdefault(test[0], []).append(test[1])
    return files


def _file_line(file: str, tests: Sequence[str], compact: bool) -> str:
    shown: list[str] = []
    previous = ""
    for test in tests:
        case = _PARAMETRIZED.match(test)
        if compact and case is not None and case.group("function") == previous:
            shown.append(case.group("cases"))
            continue
        previous = case.group("function") if case is not None else ""
        shown.append(test)
    return f"  {file + ' ' if file else ''}passed: {', '.join(shown)}"

"""What a tool result's text is, judged from the text alone (never configured). Pure.

The order matters: a text that parses as a JSON array of objects is one whatever its lines look
like; a unified diff has its own headers; search results and listings are lines of paths; source
code has signatures; a log has levels, timestamps or test verdicts, or is a git log; the rest is
plain text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from typing import Final

import orjson

from ctxproxy.tool_outputs.history import COMMIT
from ctxproxy.tool_outputs.json_tree import has_rows


class Kind(Enum):
    JSON_ROWS = "json"
    DIFF = "diff"
    LISTING = "listing"
    CODE = "code"
    LOG = "log"
    TEXT = "text"


GREP_LINE: Final = re.compile(r"^[\w./@+-][^\s:]*:\d+[:-]")
PATH_LINE: Final = re.compile(r"^\.{0,2}/?[\w.@+-]+(/[\w.@+-]+)+/?$|^[\w.@+-]+\.[A-Za-z0-9]{1,8}$")
SIGNATURE: Final = re.compile(
    r"^\s*(?:\d+[\t:|]\s*)?(?:(?:async\s+)?def |class |function |func |fn |pub (?:fn|struct|enum) |"
    r"(?:public|private|protected|static|export)\s+\S|interface |struct |impl |#include|package |import |"
    r"from \S+ import )"
)
LOG_LINE: Final = re.compile(
    r"\b(?:DEBUG|INFO|WARN(?:ING)?|ERROR|FATAL|CRITICAL|TRACE|PASSED|FAILED|SKIPPED|XFAIL|XPASS|ok|FAIL)\b"
    r"|^\s*\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|^\s*\d{2}:\d{2}:\d{2}|^(?:commit [0-9a-f]{7,40}|Author: |Date: )"
)
_SAMPLE: Final = 400  # lines looked at


def detect(text: str) -> Kind:
    stripped = text.strip()
    if stripped[:1] in ("[", "{") and _json_rows(stripped):
        return Kind.JSON_ROWS
    lines = [line for line in text.splitlines()[:_SAMPLE] if line.strip()]
    if not lines:
        return Kind.TEXT
    if _is_diff(lines):
        return Kind.DIFF
    if COMMIT.match(lines[0]):
        return Kind.LOG  # a git log, however long its messages
    if _share(lines, lambda s: bool(GREP_LINE.match(s) or PATH_LINE.match(s.strip()))) >= 0.6:
        return Kind.LISTING
    if _share(lines, lambda s: bool(SIGNATURE.match(s))) >= 0.05 and _code_like(lines):
        return Kind.CODE
    if _share(lines, lambda s: bool(LOG_LINE.search(s))) >= 0.2:
        return Kind.LOG
    return Kind.TEXT


def _json_rows(text: str) -> bool:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return has_rows(value)


def _is_diff(lines: list[str]) -> bool:
    heads = sum(1 for s in lines if s.startswith(("diff --git ", "--- ", "+++ ")))
    hunks = sum(1 for s in lines if s.startswith("@@ ") and " @@" in s[2:])
    return hunks >= 1 and heads >= 2


def _code_like(lines: list[str]) -> bool:
    """Indented blocks and brackets: more code than prose."""
    indented = _share(lines, lambda s: s[:1] in (" ", "\t") or bool(re.match(r"^\s*\d+[\t:|]\s{2,}", s)))
    return indented >= 0.3


def _share(lines: list[str], test: Callable[[str], bool]) -> float:
    return sum(1 for line in lines if test(line)) / len(lines)

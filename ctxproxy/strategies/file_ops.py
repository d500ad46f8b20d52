"""Which files a conversation's tool calls read and modified. Pure functions over messages.

A tool call counts when its function name says what it does and its arguments name a path:

- The name is matched case-insensitively, first whole (``read_file``), then without a dotted
  namespace (``fs.write_file`` → ``write_file``), then by its last word (``project_view`` →
  ``view``; words are separated by ``_``, ``.``, ``-`` or a camelCase boundary, so ``MultiEdit``
  → ``edit``). A name whose last word is ``file(s)`` goes by its first word (``write_to_file``,
  ``replace_in_file``). A name that says nothing (``str_replace_editor``) falls back to a
  ``command`` argument (``{"command": "view", ...}``), as text-editor tools send.
- Paths come from the keys in ``PATH_KEYS``; each value may be a string or a list of strings.
  ``apply_patch``-style calls also name their files inside the patch text of an ``input`` or
  ``patch`` argument (``*** Update File: x``). A search tool (``grep``, ``glob``) reads the
  ``path`` it searches; a ``glob`` tool also its ``pattern``, which names files.
- A call of no such name that runs a shell command (``Bash``, ``shell``, ``exec_command``: a
  ``command`` / ``cmd`` string or argv list) reads and modifies what that command line does,
  read by its words (``ctxproxy.strategies.shell_files``): ``cat a.py``, ``sed -i … b.py``,
  ``> out.txt``, an ``apply_patch`` envelope.
- Arguments are a JSON object string (OpenAI) or an already decoded mapping; anything else —
  invalid JSON, a JSON array, a number — names no file. Nothing here raises on client input.

Both ``tool_calls`` and the legacy ``function_call`` of assistant messages are read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxproxy.strategies.base import Message
from ctxproxy.strategies.shell_files import command_line, patch_files, shell_file_ops
from ctxproxy.vocabulary import ROLE_ASSISTANT

Op = Literal["read", "modified"]

READ_WORDS = frozenset({"read", "view", "cat", "open", "read_file", "get_file", "grep", "glob"})
MODIFY_WORDS = frozenset(
    {
        "write", "edit", "create", "patch", "apply_patch", "str_replace", "replace", "insert",
        "delete", "remove", "move", "rename", "write_file",
    }
)  # fmt: skip
PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "target_file", "notebook_path", "paths")
PATTERN_WORDS = frozenset({"glob"})  # tools whose ``pattern`` argument names files
PATCH_KEYS = ("input", "patch")  # apply_patch's envelope text
FILE_WORDS = frozenset({"file", "files"})
_WORD_SEPARATORS = re.compile(r"[_.\-]+")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True)
class FileOps:
    read: frozenset[str] = frozenset()
    modified: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any]
    id: str | None = None  # what its result's ``tool_call_id`` names (None: a legacy function_call)


def _words(name: str) -> list[str]:
    return [w for w in _WORD_SEPARATORS.split(_CAMEL_BOUNDARY.sub("_", name.strip()).lower()) if w]


def classify_name(name: str) -> Op | None:
    """``read``, ``modified`` or None for a tool (or editor command) name."""
    lowered = name.strip().lower()
    words = _words(name)
    if not words:
        return None
    candidates = [lowered, lowered.rsplit(".", 1)[-1], words[-1]]
    if words[-1] in FILE_WORDS:
        candidates.append(words[0])
    for candidate in candidates:
        if candidate in READ_WORDS:
            return "read"
        if candidate in MODIFY_WORDS:
            return "modified"
    return None


def parse_arguments(raw: object) -> Mapping[str, Any]:
    """A call's arguments as a mapping; {} when they are not a JSON object."""
    if isinstance(raw, Mapping):
        return raw
    if not isinstance(raw, str | bytes):
        return {}
    try:
        decoded = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return decoded if isinstance(decoded, dict) else {}


def tool_calls(message: Message) -> Iterator[ToolCall]:
    """The function calls an assistant message makes (``tool_calls`` and legacy ``function_call``)."""
    if message.get("role") != ROLE_ASSISTANT:
        return
    raw_calls = message.get("tool_calls")
    functions: list[tuple[object, object]] = []
    if isinstance(raw_calls, list):
        functions += [(call.get("function"), call.get("id")) for call in raw_calls if isinstance(call, Mapping)]
    functions.append((message.get("function_call"), None))
    for function, call_id in functions:
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            arguments = parse_arguments(function.get("arguments"))
            yield ToolCall(function["name"], arguments, call_id if isinstance(call_id, str) else None)


def paths_in(arguments: Mapping[str, Any], keys: Sequence[str] = PATH_KEYS) -> list[str]:
    """The paths ``arguments`` name under ``keys`` and in a patch envelope, in order, once each."""
    found: list[str] = []
    for key in keys:
        found += _strings(arguments.get(key))
    for key in PATCH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str):
            found += patch_files(value)
    return list(dict.fromkeys(found))


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        values: Sequence[object] = [value]
    elif isinstance(value, list):
        values = value
    else:
        return []
    return [v.strip() for v in values if isinstance(v, str) and v.strip()]


def classify_call(call: ToolCall) -> Op | None:
    op = classify_name(call.name)
    command = call.arguments.get("command")
    if op is None and isinstance(command, str):
        op = classify_name(command)
    return op


def call_file_ops(call: ToolCall) -> list[tuple[Op, str]]:
    """``(op, path)`` for each file one call reads or modifies, in the order it names them."""
    op = classify_call(call)
    if op is not None:
        keys = (*PATH_KEYS, "pattern") if PATTERN_WORDS.intersection(_words(call.name)) else PATH_KEYS
        return [(op, path) for path in paths_in(call.arguments, keys)]
    line = command_line(call.arguments)
    return shell_file_ops(line) if line is not None else []


def file_ops_in_order(messages: Iterable[Message]) -> list[tuple[Op, str]]:
    """Every ``(op, path)`` the tool calls in ``messages`` make, in order, once each."""
    return list(dict.fromkeys(op for message in messages for call in tool_calls(message) for op in call_file_ops(call)))


def extract_file_ops(messages: Iterable[Message]) -> FileOps:
    """Files read and files modified by the tool calls in ``messages`` (a file may be in both)."""
    ops = file_ops_in_order(messages)
    return FileOps(
        frozenset(path for op, path in ops if op == "read"), frozenset(path for op, path in ops if op == "modified")
    )

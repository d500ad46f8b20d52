"""File paths an agent's messages mention, and a compact way to list many of them. Pure.

An agent finds files by running tools: ``grep`` answers ``file:line:text``, ``git log --stat``
and ``pip show -f`` list files, a stack trace names them. Those paths are what it will need again
after the turns that showed them were compacted, and most of them are in tool output, not in
the arguments of file tools (``ctxproxy.strategies.file_ops`` reads those). ``mentioned_paths``
finds them in every text of a range: message content, tool call arguments, tool results. A path
here is a relative or absolute name with at least one directory and a file name with an
extension (``ctxproxy/cli.py``, ``/etc/hosts.conf``, ``a/b/c.tar.gz``); a URL's path is not one
(``https://x.org/a/b.html`` names no file of the agent's), nor is a word with no directory.

``group_paths`` writes a list of paths by directory and extension (everything from a name's
first dot), the way a shell's brace expansion reads: ``ctxproxy/summarize/{body,work}.py``;
``expand_paths`` reads such a list back. Groups keep the order their first path was seen in,
names their own order, so the same list always gives the same text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ctxproxy.summarize.transcript import content_text, tool_calls

__all__ = ["SCAN_CHARS", "expand_paths", "group_paths", "mentioned_paths", "split_listed"]

SCAN_CHARS: Final = 50_000  # how much of one text is searched for paths
_PATH: Final = re.compile(r"(?<![\w/.:~-])/?(?:[\w.-]+/)+[\w-][\w.-]*\.[A-Za-z][\w]{0,5}(?![\w/-])")
_URL_TAIL: Final = re.compile(r"[\w+.-]+://\S*$")
_GROUP: Final = re.compile(r"^(.*/)\{([^{}]*)\}([^{}/]*)$")


def _paths_in(text: str) -> Iterable[str]:
    text = text[:SCAN_CHARS]
    for found in _PATH.finditer(text):
        if not _URL_TAIL.search(text, max(0, found.start() - 200), found.start()):
            yield found.group().rstrip(".")


def _texts(message: Mapping[str, Any]) -> Iterable[str]:
    yield content_text(message.get("content"))
    for _, arguments in tool_calls(message):
        yield arguments.replace("\\/", "/")


def mentioned_paths(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every file path the messages' texts name (module docstring), in first-seen order."""
    seen: dict[str, None] = {}
    for message in messages:
        if isinstance(message, Mapping):
            for text in _texts(message):
                seen.update(dict.fromkeys(_paths_in(text)))
    return list(seen)


def group_paths(paths: Iterable[str]) -> list[str]:
    """``paths`` by directory and extension: ``dir/a.py`` alone, ``dir/{a,b}.py`` for two or more."""
    groups: dict[tuple[str, str], list[str]] = {}
    for path in dict.fromkeys(paths):
        directory, slash, name = path.rpartition("/")
        stem, dot, extension = name.partition(".")
        if not stem:  # ".env": a name, not an extension
            stem, dot, extension = name, "", ""
        groups.setdefault((directory + slash, dot + extension), []).append(stem)
    return [
        f"{d}{stems[0]}{ext}" if len(stems) == 1 else f"{d}{{{','.join(stems)}}}{ext}"
        for (d, ext), stems in groups.items()
    ]


def expand_paths(entries: Iterable[str]) -> list[str]:
    """The paths of ``group_paths`` entries (and of plain names, which stay as they are)."""
    out: list[str] = []
    for entry in entries:
        group = _GROUP.match(entry.strip())
        if group:
            head, tail = group.group(1), group.group(3)
            out += [head + name.strip() + tail for name in group.group(2).split(",") if name.strip()]
        elif entry.strip():
            out.append(entry.strip())
    return out


def split_listed(value: str) -> list[str]:
    """The entries of a comma-separated list whose entries may hold braces (``a/{b,c}, d``)."""
    entries, depth, start = [], 0, 0
    for i, char in enumerate(value):
        depth += (char == "{") - (char == "}")
        if char == "," and depth <= 0:
            entries.append(value[start:i])
            start, depth = i + 1, 0
    entries.append(value[start:])
    return [entry.strip() for entry in entries if entry.strip()]

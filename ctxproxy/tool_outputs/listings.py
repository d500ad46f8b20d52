"""Search results (``grep -n`` lines) and file listings: how many, in which files, the top entries.
Pure; whole lines only.

Grep lines (``path:line:text``) are grouped by file: every file with its count of matches (the
``MAX_FILES`` with most matches), then the first ``TOP`` matches as they came. A listing of paths
is first written losslessly, each directory once with the names under it (``a/b/: c.py, d.py``;
several names sharing a long extension as ``{x, y, z}.cpython-311.pyc``) and every other line
as it came, when that is at most ``GROUPED_SHARE`` of the original: every
name stays findable. A listing too long for that keeps its first ``TOP`` entries and counts the
rest by directory.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from ctxproxy.tool_outputs.detect import GREP_LINE, PATH_LINE
from ctxproxy.tool_outputs.shrunk import Shrunk, plural

TOP: Final = 25
MAX_FILES: Final = 40
MIN_LINES: Final = TOP + 10
LONG_EXTENSION: Final = 8  # an extension this long (a build tag), shared by MIN_SHARING names, is written once
MIN_SHARING: Final = 3
GROUPED_SHARE: Final = 0.7  # the lossless grouping is used when it saves at least 30 % (compress.MIN_SAVING)


def compress(text: str) -> Shrunk | None:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < MIN_LINES:
        return None
    matches = [line for line in lines if GREP_LINE.match(line)]
    if len(matches) >= len(lines) / 2:
        return _grep(lines, matches)
    grouped = _grouped(lines)
    if grouped is not None and len(grouped.text) <= GROUPED_SHARE * len(text):
        return grouped
    return _listing(lines)


def _grep(lines: list[str], matches: list[str]) -> Shrunk:
    files = Counter(line.split(":", 1)[0] for line in matches)
    out = [f"{plural(len(matches), 'match')} in {plural(len(files), 'file')}:"]
    out.extend(f"  {name}: {n}" for name, n in files.most_common(MAX_FILES))
    if len(files) > MAX_FILES:
        out.append(f"  … {len(files) - MAX_FILES} more files")
    out.append(f"First {min(TOP, len(lines))}:")
    out.extend(lines[:TOP])
    return Shrunk("\n".join(out), f"{len(lines) - TOP} of {len(lines)} result lines elided")


def _grouped(lines: list[str]) -> Shrunk | None:
    """Every path under its directory, the directories in the order they first came, each where
    its first path was; other lines as they came. None when no directory holds two paths."""
    folders: dict[tuple[str, str], list[str]] = {}  # (indent, directory): names
    order: list[str | tuple[str, str]] = []
    for line in lines:
        path = line.strip()
        if "/" not in path.rstrip("/") or not PATH_LINE.match(path):
            order.append(line)
            continue
        folder, name = path.rstrip("/").rsplit("/", 1)
        key = (line[: len(line) - len(line.lstrip())], folder)
        if key not in folders:
            folders[key] = []
            order.append(key)
        folders[key].append(name + "/" * path.endswith("/"))
    if not any(len(names) > 1 for names in folders.values()):
        return None
    out = [item if isinstance(item, str) else f"{item[0]}{item[1]}/: {_contents(item, folders)}" for item in order]
    paths = sum(len(names) for names in folders.values())
    head = f"{plural(len(lines), 'entry')}, each path under its directory ({plural(len(folders), 'directory')}):"
    return Shrunk("\n".join([head, *out]), f"nothing elided ({plural(paths, 'path')} grouped by directory)")


def _contents(key: tuple[str, str], folders: dict[tuple[str, str], list[str]]) -> str:
    """A directory's names; when they are its parent's files of one extension, each with one
    long extension of its own (``__pycache__``'s ``.cpython-311.pyc`` of each ``.py``), that."""
    names = folders[key]
    parent = folders.get((key[0], key[1].rsplit("/", 1)[0])) if "/" in key[1] else None
    extensions = {_extension(name) for name in names}
    if parent is None or len(names) < MIN_SHARING or len(extensions) != 1:
        return _names(names)
    (ext,) = extensions
    stems = [name[: -len(ext)] for name in names]
    for source in dict.fromkeys(_extension(name) for name in parent):
        if len(ext) >= LONG_EXTENSION and source and [n[: -len(source)] for n in parent if n.endswith(source)] == stems:
            return f"one {ext} for each {source} of {key[1].rsplit('/', 1)[0]}/ ({len(names)})"
    return _names(names)


def _names(names: list[str]) -> str:
    """A directory's names, those sharing a long extension written as ``{a, b}.ext`` where the
    first of them was."""
    extensions = Counter(_extension(name) for name in names)
    shared = {ext for ext, n in extensions.items() if len(ext) >= LONG_EXTENSION and n >= MIN_SHARING}
    stems: dict[str, list[str]] = {ext: [] for ext in shared}
    out: list[str] = []
    for name in names:
        ext = _extension(name)
        if ext not in shared:
            out.append(name)
            continue
        if not stems[ext]:
            out.append(ext)  # where the group goes; an extension is no name (names here have no braces)
        stems[ext].append(name[: -len(ext)])
    return ", ".join(f"{{{', '.join(stems[item])}}}{item}" if item in shared else item for item in out)


def _extension(name: str) -> str:
    """From the name's first dot on (``.cpython-311.pyc``); a leading dot is the name's own."""
    dot = name.find(".", 1)
    return name[dot:] if dot > 0 else ""


def _listing(lines: list[str]) -> Shrunk:
    rest = lines[TOP:]
    folders = Counter(line.strip().rsplit("/", 1)[0] if "/" in line else "." for line in rest)
    out = [f"{plural(len(lines), 'entry')}; the first {TOP}:", *lines[:TOP]]
    out.append("The rest, by folder: " + ", ".join(f"{name} ({n})" for name, n in folders.most_common(MAX_FILES)))
    if len(folders) > MAX_FILES:
        out.append(f"… and {len(folders) - MAX_FILES} more folders")
    return Shrunk("\n".join(out), f"{len(rest)} of {len(lines)} entries elided")

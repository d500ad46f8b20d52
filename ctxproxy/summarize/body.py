"""The summary body as data: parse it, render it, fit it into a token budget. Pure.

A body is the sections of ``SECTIONS`` (each a list of items) plus the files lists. An item is
the Markdown of one bullet (``- text``, possibly followed by indented continuation lines) or
one fenced code block. ``parse_body`` accepts what this project renders and what a model
writes: headings are matched loosely (``## Key Facts``, ``**TODOs**`` lines are not headings,
``### 关键信息`` is), text before the first heading and sections with unknown names land in
Background, a leading ``## Context Summary`` header is dropped, files are read from
``Read: a, b`` / ``Modified: c`` / ``Seen: d/{e.py,f.py}`` lines under ``### Files``. ``Seen`` lists
the paths the agent's tools named (``ctxproxy.summarize.paths``: grep hits, listings, stack
traces) that it neither read nor modified, by directory so that hundreds fit in a few lines.

``fit_body`` enforces ``max_tokens``: it drops whole items, always from the section that
currently costs the most tokens (Goal last; Requests, Commands and Errors, what an agent did,
count a third of their tokens there), the oldest item (``drop="oldest"``, rolling
summaries) or the last one (``drop="last"``, a model's answer) first; then shortens the files
lists, oldest entries first (files only seen before the others, and kept to a quarter of the
budget); the one item left is cut, never dropped, so a non-empty body never fits into nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ctxproxy.summarize.base import FILES_SECTION, SECTIONS
from ctxproxy.summarize.paths import expand_paths, group_paths, split_listed
from ctxproxy.tokens import TokenCounter

__all__ = [
    "MAX_CHARS_PER_TOKEN",
    "Body",
    "bullet",
    "fit_body",
    "item_key",
    "known_section",
    "merge_files",
    "note_seen",
    "normalise",
    "parse_body",
    "render_body",
]

GOAL = SECTIONS[0]
SEEN = "Seen"
FILES_LABELS = ("Read", "Modified", SEEN)
# What an agent did, kept before prose: given way only past WORK_WEIGHT × the largest other section.
WORK_SECTIONS = frozenset({"Requests", "Commands", "Errors"})
WORK_WEIGHT = 3
# Punctuation and markup that do not change what an item says (ASCII and CJK).
_IGNORED = str.maketrans({c: " " for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~…“”‘’。，、；：！？（）【】《》「」"})
_MARKER = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s{0,3}#{2,6}\s+(.+?)\s*#*\s*$")
_FENCE = "```"
_OMITTED = re.compile(r"^…")
# (fragment of a heading, lower-cased) -> section; first match wins. Besides English, the
# languages conversations most often come in (Chinese, Spanish, French, German, Japanese).
_ALIASES: tuple[tuple[str, str], ...] = (
    ("file", FILES_SECTION),
    ("文件", FILES_SECTION),
    ("archivo", FILES_SECTION),
    ("fichier", FILES_SECTION),
    ("datei", FILES_SECTION),
    ("ファイル", FILES_SECTION),
    ("goal", "Goal"),
    ("objective", "Goal"),
    ("目标", "Goal"),
    ("需求", "Goal"),
    ("objetivo", "Goal"),
    ("objectif", "Goal"),
    ("ziel", "Goal"),
    ("目的", "Goal"),
    ("目標", "Goal"),
    ("fact", "Key facts"),
    ("关键", "Key facts"),
    ("事实", "Key facts"),
    ("hecho", "Key facts"),
    ("fait", "Key facts"),
    ("fakt", "Key facts"),
    ("事実", "Key facts"),
    ("constraint", "Constraints"),
    ("约束", "Constraints"),
    ("restricci", "Constraints"),
    ("contrainte", "Constraints"),
    ("einschränkung", "Constraints"),
    ("制約", "Constraints"),
    ("decision", "Decisions"),
    ("决策", "Decisions"),
    ("décision", "Decisions"),
    ("entscheidung", "Decisions"),
    ("決定", "Decisions"),
    ("todo", "TODOs / next steps"),
    ("to-do", "TODOs / next steps"),
    ("next", "TODOs / next steps"),
    ("待办", "TODOs / next steps"),
    ("下一步", "TODOs / next steps"),
    ("pendiente", "TODOs / next steps"),
    ("próximo", "TODOs / next steps"),
    ("prochain", "TODOs / next steps"),
    ("à faire", "TODOs / next steps"),
    ("nächste", "TODOs / next steps"),
    ("aufgabe", "TODOs / next steps"),
    ("次の", "TODOs / next steps"),
    ("request", "Requests"),
    ("请求", "Requests"),
    ("error", "Errors"),
    ("错误", "Errors"),
    ("command", "Commands"),
    ("命令", "Commands"),
    ("snippet", "Important snippets"),
    ("code", "Important snippets"),
    ("代码", "Important snippets"),
    ("片段", "Important snippets"),
    ("código", "Important snippets"),
    ("コード", "Important snippets"),
    ("background", "Background"),
    ("context", "Background"),
    ("overview", "Background"),
    ("背景", "Background"),
    ("contexto", "Background"),
    ("contexte", "Background"),
    ("hintergrund", "Background"),
)


def normalise(text: str) -> str:
    """The de-duplication key of a text: case-folded words, punctuation and markup ignored."""
    return " ".join(text.casefold().translate(_IGNORED).split())


def item_key(item: str) -> str:
    return normalise(item)  # the bullet's "- " is punctuation too


def bullet(text: str) -> str:
    return "- " + " ".join(text.split())


@dataclass
class Body:
    sections: dict[str, list[str]] = field(default_factory=dict)
    files_read: list[str] = field(default_factory=list)
    files_modified: list[str] = field(default_factory=list)
    files_omitted: tuple[int, int, int] = (0, 0, 0)  # (read, modified, seen) names dropped to fit the budget
    files_seen: list[str] = field(default_factory=list)  # named by the agent's tools, neither read nor modified

    def items(self, section: str) -> list[str]:
        return self.sections.setdefault(section, [])

    def item_count(self) -> int:
        return sum(len(items) for items in self.sections.values())


_HEADING_TAIL = re.compile(r"\s+[—–-]\s.*$|\s*[:：(（].*$")


def known_section(heading: str) -> str | None:
    """The section a heading names (``SECTIONS``, ``Files``, or an alias in a known language);
    None when it names none."""
    name = heading.strip().strip("*_").strip()
    lowered = _HEADING_TAIL.sub("", name).casefold() or name.casefold()
    for section in (*SECTIONS, FILES_SECTION):
        if lowered == section.casefold():
            return section
    for fragment, section in _ALIASES:
        if fragment in lowered:
            return section
    return None


def _section_for(heading: str) -> str:
    return known_section(heading) or "Background"


def _split_files(value: str) -> list[str]:
    return expand_paths(name for name in split_listed(value) if not _OMITTED.match(name))


def parse_body(text: str) -> Body:
    body = Body()
    section = "Background"
    fence: list[str] | None = None  # the open code block's item lines
    for line in text.strip().splitlines():
        if fence is not None:
            fence.append(line)
            if line.strip().startswith(_FENCE):
                body.items(section).append("\n".join(fence))
                fence = None
            continue
        heading = _HEADING.match(line)
        if heading:
            if line.lstrip().startswith("## ") and "context summary" in heading.group(1).casefold():
                continue
            section = _section_for(heading.group(1))
            continue
        if not line.strip():
            continue
        if section == FILES_SECTION:
            entry = _MARKER.sub("", line, count=1).strip()
            label, _, value = entry.partition(":")
            if label.strip().casefold() == "read":
                body.files_read = merge_files(body.files_read, _split_files(value))
            elif label.strip().casefold() == "modified":
                body.files_modified = merge_files(body.files_modified, _split_files(value))
            elif label.strip().casefold() == SEEN.casefold():
                body.files_seen = merge_files(body.files_seen, _split_files(value))
            continue
        items = body.items(section)
        if line.lstrip().startswith(_FENCE):
            fence = [line.strip()]
        elif _MARKER.match(line) and len(line) - len(line.lstrip()) <= 1:
            items.append(bullet(_MARKER.sub("", line, count=1)))
        elif line[:1].isspace() and items:
            items[-1] += "\n" + line.rstrip()
        else:
            items.append(bullet(line))
    if fence is not None:  # an unclosed block: keep it, closed
        body.items(section).append("\n".join([*fence, _FENCE]))
    body.sections = {name: items for name, items in body.sections.items() if items}
    return body


def merge_files(*lists: Iterable[str]) -> list[str]:
    """The union of file lists, in first-seen order."""
    return list(dict.fromkeys(name for names in lists for name in names if name))


def note_seen(body: Body, *lists: Iterable[str]) -> None:
    """``body``'s files seen: the union of ``lists`` but the files it lists as read or modified."""
    listed = {*body.files_read, *body.files_modified}
    body.files_seen = [name for name in merge_files(*lists) if name not in listed]


def _files_lines(lists: Sequence[list[str]], omitted: Sequence[int]) -> list[str]:
    """``Read: …``, ``Modified: …`` and ``Seen: …`` (by directory, ``paths.group_paths``)."""
    lines = []
    for label, names, dropped in zip(FILES_LABELS, lists, omitted, strict=True):
        if names or dropped:
            shown = ([f"… (+{dropped} earlier)"] if dropped else []) + (group_paths(names) if label == SEEN else names)
            lines.append(f"{label}: {', '.join(shown)}")
    return lines


def render_body(body: Body) -> str:
    parts = [f"### {name}\n" + "\n".join(body.sections[name]) for name in SECTIONS if body.sections.get(name)]
    files = _files_lines((body.files_read, body.files_modified, body.files_seen), body.files_omitted)
    if files:
        parts.append(f"### {FILES_SECTION}\n" + "\n".join(files))
    return "\n\n".join(parts)


# --- the budget --------------------------------------------------------------------------------

# Cheap first pass: assume no more than this many characters per token, so a body whose
# characters exceed budget * this is certainly too long whatever the exact count.
MAX_CHARS_PER_TOKEN = 8


class _Fitter:
    def __init__(self, body: Body, max_tokens: int, counter: TokenCounter, drop: Literal["oldest", "last"]) -> None:
        self.sections = {name: list(items) for name, items in body.sections.items() if items}
        self.read = list(body.files_read)
        self.modified = list(body.files_modified)
        self.seen = list(body.files_seen)
        self.omitted = [0, 0, 0]
        self.max_tokens = max_tokens
        self.counter = counter
        self.index = 0 if drop == "oldest" else -1

    def text(self) -> str:
        omitted = (self.omitted[0], self.omitted[1], self.omitted[2])
        return render_body(Body(self.sections, self.read, self.modified, omitted, self.seen))

    def fits(self) -> bool:
        return self.counter.count_text(self.text()) <= self.max_tokens

    def _victim(self, size: dict[str, int]) -> str | None:
        """The section to drop an item from: the largest one other than Goal, else Goal."""
        if sum(len(items) for items in self.sections.values()) <= 1:
            return None
        others = [name for name in SECTIONS if name != GOAL and self.sections.get(name)]
        if others:  # ties: earliest in SECTIONS
            return max(others, key=lambda name: size[name] // (WORK_WEIGHT if name in WORK_SECTIONS else 1))
        return GOAL if len(self.sections.get(GOAL, ())) > 1 else None

    def _drop(self, name: str) -> str:
        items = self.sections[name]
        item = items.pop(self.index if name != GOAL else -1)  # Goal: keep the first request
        if not items:
            del self.sections[name]
        return item

    def drop_by(self, cost: dict[str, int], size: dict[str, int], limit: int) -> None:
        """Drop items while the estimated total exceeds ``limit``."""
        total = sum(size.values())
        while total > limit:
            name = self._victim(size)
            if name is None:
                return
            item = self._drop(name)
            size[name] -= cost[item]
            total -= cost[item]

    def cap_sections(self, limit: int) -> None:
        """Keep in each section only the items (newest or first, as ``drop`` says) that fit
        ``limit`` characters on their own: what the largest-first dropping would keep at most."""
        for name, items in self.sections.items():
            ordered = items[::-1] if self.index == 0 else items
            kept, total = 0, 0
            for item in ordered:
                total += len(item) + 1
                if total > limit and kept:
                    break
                kept += 1
            if kept < len(items):
                self.sections[name] = items[len(items) - kept :] if self.index == 0 else items[:kept]

    def files_text(self) -> str:
        return "\n".join(_files_lines((self.read, self.modified, self.seen), self.omitted))

    def seen_text(self) -> str:
        return "\n".join(_files_lines(([], [], self.seen), (0, 0, self.omitted[2])))

    def shorten_seen(self) -> bool:
        """Drop the oldest file only seen; False when there is none."""
        if not self.seen:
            return False
        self.seen.pop(0)
        self.omitted[2] += 1
        return True

    def shorten_files(self) -> bool:
        """Drop the oldest file of the longest list (files only seen first); False when there is none left."""
        if self.shorten_seen():
            return True
        lists = [self.read, self.modified]
        longest = max((0, 1), key=lambda i: len(lists[i]))
        if not lists[longest]:
            return False
        lists[longest].pop(0)
        self.omitted[longest] += 1
        return True

    def cut_last_item(self) -> None:
        """Cut the longest remaining item (the only one left) until the body fits; its marker
        and first character stay even when the budget is smaller than that."""
        name = max(self.sections, key=lambda section: len(self.sections[section][-1]), default=None)
        if name is None:
            return
        item = self.sections[name][-1]
        keep = 3 if item.startswith("- ") else 1
        low, high = keep, len(item)
        while low < high:  # the longest prefix that fits
            middle = (low + high + 1) // 2
            self.sections[name][-1] = item[:middle].rstrip() + "…"
            if self.fits():
                low = middle
            else:
                high = middle - 1
        self.sections[name][-1] = item[:low].rstrip() + "…"


def fit_body(body: Body, max_tokens: int, counter: TokenCounter, *, drop: Literal["oldest", "last"]) -> str:
    """``body`` rendered, within ``max_tokens`` (see the module docstring for what goes first)."""
    fitter = _Fitter(body, max(1, max_tokens), counter, drop)
    # 0. the files lists take at most half of the budget, the files only seen a quarter.
    quarter = fitter.max_tokens // 4
    while len(fitter.seen_text()) > quarter * MAX_CHARS_PER_TOKEN and fitter.shorten_seen():
        pass
    while counter.count_text(fitter.seen_text()) > quarter and fitter.shorten_seen():
        pass
    half = fitter.max_tokens // 2
    while len(fitter.files_text()) > half * MAX_CHARS_PER_TOKEN and fitter.shorten_files():
        pass
    while counter.count_text(fitter.files_text()) > half and fitter.shorten_files():
        pass
    # 1. characters: cheap, and brings a huge body down to a few budgets' worth of text.
    fitter.cap_sections(fitter.max_tokens * MAX_CHARS_PER_TOKEN)
    chars = {item: len(item) + 1 for items in fitter.sections.values() for item in items}
    sizes = {name: sum(chars[item] for item in items) for name, items in fitter.sections.items()}
    fitter.drop_by(chars, sizes, fitter.max_tokens * MAX_CHARS_PER_TOKEN)
    if fitter.fits():
        return fitter.text()
    # 2. tokens per item (+1 for the newline), then 3. exact checks of the whole text.
    costs = {item: counter.count_text(item) + 1 for items in fitter.sections.values() for item in items}
    tokens = {name: sum(costs[item] for item in items) for name, items in fitter.sections.items()}
    files = counter.count_text(fitter.files_text())
    headings = sum(counter.count_text(f"### {name}") + 2 for name in fitter.sections)
    fitter.drop_by(costs, tokens, fitter.max_tokens - files - headings)
    while not fitter.fits():
        name = fitter._victim(tokens)
        if name is not None:
            item = fitter._drop(name)
            tokens[name] -= costs.get(item, 0)
        elif not fitter.shorten_files():
            fitter.cut_last_item()
            break
    return fitter.text()

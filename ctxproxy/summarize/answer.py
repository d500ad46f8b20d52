"""A model's summary answer, in whatever reasonable shape it came, as a summary ``Body``. Pure.

The prompt asks for ``### Section`` headings and ``-`` bullets; models answer in many other
shapes, and a summary is never thrown away for its shape. Accepted besides the asked format:

- headings of any level (``# Goal`` … ``###### Goal``), numbered (``## 1. Goal``);
- labels naming a section: bold on their own line (``**Goal:**``, ``__Goal__``), bold leading a
  line or a bullet (``**Goal:** ship v2``, ``- **Decisions:** use Postgres``), plain or numbered
  (``Goal: ship v2``, ``2. Key facts:``) — plain ones only when they name a known section
  (``body.known_section``: the sections, and their names in the languages it knows);
- bullets with ``-``, ``*``, ``•``, ``+`` or numbers, and indented continuation lines;
- the summary inside a code fence (``markdown``, ``json``, ``text`` or none), with or without
  a line of preamble around it;
- a preamble ("Here is the summary:", "Sure!") and closing remarks ("Let me know if …") around
  the summary, dropped, as are a title heading (``# Summary``) and horizontal rules;
- a JSON object whose keys name sections (``{"goal": …, "key_facts": […]}``), also under one
  wrapping key (``{"summary": {…}}``);
- plain prose: each paragraph line kept, as Background.

Whatever is not recognised lands in Background (``parse_body``): nothing the model wrote is lost.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from ctxproxy.summarize.base import FILES_SECTION
from ctxproxy.summarize.body import Body, known_section, parse_body

__all__ = ["read_answer"]

_FENCE = re.compile(r"```[ \t]*(?P<lang>[\w-]*)[^\n]*\n(?P<inner>.*?)\n?[ \t]*```", re.S)
_PLAIN_FENCES = ("", "markdown", "md", "json", "text", "txt")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?:\d{1,2}[.)]\s*)?(?P<label>.+?)\s*#*\s*$")
_BOLD = re.compile(
    r"^(?:[-*•+]\s+|\d{1,2}[.)]\s+)?(?:\*\*|__)(?P<label>[^*_\n]{1,60}?)[ \t]*[:：]?[ \t]*(?:\*\*|__)"
    r"[ \t]*[:：]?[ \t]*(?P<rest>.*)$"
)
_PLAIN = re.compile(r"^(?:\d{1,2}[.)]\s+)?(?P<label>[^\W\d_][^:：\n]{0,40}?)\s*[:：]\s*(?P<rest>.*)$")
_LISTED = re.compile(r"^(?:[-*•+]|\d{1,2}[.)])\s")
_RULE = re.compile(r"^\s{0,3}(?:-{3,}|\*{3,}|_{3,})\s*$")
_PREAMBLE = re.compile(
    r"^(?:(?:here(?:'s| is| are)|sure|certainly|of course|okay|ok|below|absolutely|great)\b|以下|好的|当然)", re.I
)
_CLOSING = re.compile(
    r"^(?:let me know|i hope|hope this|feel free|if you (?:need|want|have|would)|is there anything|please let me"
    r"|如需|希望|如果)",
    re.I,
)
_TITLES = ("summary", "摘要", "总结", "resumen", "résumé", "zusammenfassung", "要約")
_LABEL_WORDS = 4  # a plain label is a section's name, not a sentence with a colon


def read_answer(text: str) -> Body:
    """The body a model's answer holds (empty when it holds nothing)."""
    text = _unfenced(text.strip())
    structured = _from_json(text)
    lines = structured if structured is not None else _canonical(text.splitlines())
    return parse_body("\n".join(_trimmed(lines)))


def _unfenced(text: str) -> str:
    """The fenced part, when the answer is a summary in a fence with at most a line or two around it."""
    fences = list(_FENCE.finditer(text))
    if len(fences) != 1 or fences[0].group("lang").casefold() not in _PLAIN_FENCES:
        return text
    fence = fences[0]
    outside = [line for line in (text[: fence.start()] + "\n" + text[fence.end() :]).splitlines() if line.strip()]
    inner = fence.group("inner").strip()
    looks_like_summary = not inner or inner.startswith("{") or any(_is_label(line) for line in inner.splitlines())
    if len(outside) <= 2 and looks_like_summary:
        return inner
    return text


def _is_label(line: str) -> bool:
    return bool(_HEADING.match(line)) or _label(line) is not None


def _label(line: str) -> tuple[str, str] | None:
    """(label, rest of the line) for a line that opens a section: a bold label alone on its line,
    or a bold or plain label (leading a bullet too) that names a known section."""
    bold = _BOLD.match(line)
    if bold:
        label, rest = bold.group("label").strip(), bold.group("rest").strip()
        alone = not rest and not _LISTED.match(line)
        if alone or known_section(label) is not None:
            return label, rest
    plain = _PLAIN.match(line)
    if plain and len(plain.group("label").split()) <= _LABEL_WORDS and known_section(plain.group("label")):
        return plain.group("label").strip(), plain.group("rest").strip()
    return None


def _canonical(lines: list[str]) -> list[str]:
    """Markdown of any of the accepted shapes as ``### Label`` headings and lines; fenced code untouched."""
    out: list[str] = []
    in_fence = False
    for line in lines:
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            out.append(line)
        elif in_fence:
            out.append(line)
        elif _RULE.match(line):
            continue
        elif heading := _HEADING.match(line):
            label = heading.group("label").strip().strip("*_").strip()
            if not _is_title(label):
                out.append(f"### {label}")
        elif labelled := _label(line):
            out.append(f"### {labelled[0]}")
            out.extend([labelled[1]] if labelled[1] else [])
        else:
            out.append(line)
    return out


def _is_title(label: str) -> bool:
    """A heading that titles the whole answer (``# Summary``, ``## Conversation summary``)."""
    lowered = label.casefold()
    return known_section(label) in (None, "Background") and any(title in lowered for title in _TITLES)


def _trimmed(lines: list[str]) -> list[str]:
    """``lines`` without a preamble before the first heading and closing remarks after the summary."""
    first = next((i for i, line in enumerate(lines) if line.startswith("### ")), None)
    if first is not None:
        lead = [line for line in lines[:first] if line.strip()]
        if lead and all(_PREAMBLE.match(line.strip()) or line.rstrip().endswith((":", "：")) for line in lead):
            lines = lines[first:]
    end = len(lines)
    while end > 0 and (not lines[end - 1].strip() or _CLOSING.match(lines[end - 1].strip())):
        end -= 1
    return lines[:end]


# --- JSON answers ---------------------------------------------------------------------------


def _from_json(text: str) -> list[str] | None:
    """An answer that is a JSON object of sections, as heading and bullet lines; None otherwise."""
    if not text.startswith("{"):
        return None
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    if len(data) == 1:
        [inner] = data.values()
        if isinstance(inner, dict):
            data = inner  # {"summary": {...}}
    lines: list[str] = []
    for key, value in data.items():
        label = str(key).replace("_", " ").replace("-", " ").strip()
        if known_section(label) == FILES_SECTION:
            lines += [f"### {FILES_SECTION}", *_files_lines(label, value)]
        else:
            lines += [f"### {label}", *(f"- {item}" for item in _items(value))]
    return lines


def _items(value: Any) -> Iterator[str]:
    """A JSON value as bullet texts, one line each."""
    if isinstance(value, str):
        for line in value.splitlines():
            if line.strip():
                yield _one_line(re.sub(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+", "", line))
    elif isinstance(value, list):
        for item in value:
            yield from _items(item) if isinstance(item, str) else [_one_line(_scalar(item))]
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield _one_line(f"{key}: {_scalar(item)}")
    elif value is not None:
        yield _one_line(_scalar(value))


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "; ".join(f"{key}: {_scalar(item)}" for key, item in value.items())
    if isinstance(value, list):
        return ", ".join(_scalar(item) for item in value)
    return orjson.dumps(value).decode()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _files_lines(label: str, value: Any) -> list[str]:
    """``Read: …`` / ``Modified: …`` lines from ``{"files": {"read": [...], "modified": [...]}}`` or
    ``{"files_read": [...]}``."""
    if isinstance(value, Mapping):
        return [line for key, names in value.items() for line in _files_lines(f"{label} {key}", names)]
    names = [name for name in (_scalar(item) for item in (value if isinstance(value, list) else [value])) if name]
    lowered = label.casefold()
    kind = "Modified" if "modif" in lowered or "writ" in lowered or "chang" in lowered else "Read"
    return [f"{kind}: {', '.join(names)}"] if names else []

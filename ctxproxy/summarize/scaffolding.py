"""What agent clients repeat every turn, told apart from what the user said. Pure and deterministic.

Agent clients (Claude Code, Codex, IDE assistants, RAG apps) put their own context into the
conversation's user turns: reminders, the date, CLAUDE.md / AGENTS.md contents, the environment,
agent and skill lists. A summary of that is a summary of the client, not of the work, so the
summarisers read messages through ``strip_scaffolding`` first. Scaffolding is:

- **a wrapper block**: a block opening with one of ``WRAPPER_TAGS`` at the start of a line and
  closed by the same tag at the end of a line (``<system-reminder>…</system-reminder>``,
  ``<environment_context>…``, ``<INSTRUCTIONS>…``; tag names are matched exactly, so a user's own
  ``<instructions>`` stays), together with a Markdown heading line right before it that
  introduces it (``# AGENTS.md instructions for /repo``). Removed from user, system and tool
  result text wherever it appears: Claude Code appends reminders to tool results too.
- **repeated text**: a text, a tagged block (any tag) or a paragraph (lines between blank lines)
  whose normalised text (``ctxproxy.summarize.body.normalise``) is at least
  ``MIN_REPEATED_CHARS`` long and appears in two or more user or system messages of the range or
  of its ``context`` (the whole conversation the range is part of). A whole text goes only when
  it is a part beside others in its message (a client's block beside the user's words); a
  message's only text loses its repeated paragraphs and blocks. Removed from user and system
  text only: a tool result that repeats a file is still what the tool returned. Shorter repeats
  ("yes", "go on", a short request said twice, even after the same boilerplate) are the user's
  words and stay.

System and developer messages are instructions, never the user's request: callers leave them out
of what they summarise; here they only count towards repetition. A text with nothing removed is
returned as it was, byte for byte; one with something removed keeps the rest with runs of blank
lines collapsed. A user message left with no content is dropped; a tool result is kept even
when empty (its call must still find it). Cost: linear in the text, one hash per paragraph.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from ctxproxy.summarize.body import normalise
from ctxproxy.vocabulary import RESULT_ROLES, ROLE_USER, SYSTEM_ROLES

__all__ = [
    "MIN_REPEATED_CHARS",
    "WRAPPER_TAGS",
    "Repeated",
    "Units",
    "message_units",
    "repeated_in",
    "repeated_texts",
    "strip_scaffolding",
    "strip_text",
    "text_parts",
    "text_units",
]

# Tags whose content is client context, not the user's words: Claude Code's reminders, slash
# command and local shell wrappers and prompt hooks; Codex's environment, instructions and
# aborted-turn notes.
WRAPPER_TAGS: Final = frozenset(
    {
        "system-reminder",
        "command-name",
        "command-message",
        "command-args",
        "local-command-stdout",
        "local-command-stderr",
        "local-command-caveat",
        "bash-input",
        "bash-stdout",
        "bash-stderr",
        "user-prompt-submit-hook",
        "environment_context",
        "user_instructions",
        "INSTRUCTIONS",
        "turn_aborted",
    }
)
MIN_REPEATED_CHARS: Final = 80
SCAFFOLDING_ROLES: Final = frozenset({ROLE_USER}) | SYSTEM_ROLES  # where repetition is counted and removed

_OPEN: Final = re.compile(r"^[ \t]*<([A-Za-z][\w.-]*)(?:[ \t][^<>\n]*)?>", re.M)
_CLOSE: Final = re.compile(r"</([A-Za-z][\w.-]*)>[ \t]*$", re.M)
# A run of non-blank lines, from a line's start; possessive, so a long blank line costs one pass.
_PARAGRAPH: Final = re.compile(r"^[^\S\n]*+\S[^\n]*+(?:\n[^\S\n]*+\S[^\n]*+)*+", re.M)
_HEADING: Final = re.compile(r"#{1,6}[ \t]+\S[^\n]*")
_BLANK_RUNS: Final = re.compile(r"\n[ \t]*(?:\n[ \t]*)+\n")


def _key(text: str) -> bytes | None:
    """The repetition key of a text, or None when it is too short to count."""
    normalised = normalise(text)
    if len(normalised) < MIN_REPEATED_CHARS:
        return None
    return hashlib.blake2b(normalised.encode(), digest_size=16).digest()


def _blocks(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, tag)`` of each top-level tagged block: an opening tag at a line's start up
    to the first closing tag of that name at a line's end. Linear: opens and closes are paired
    by position, never by rescanning the text."""
    if "<" not in text:
        return []
    closes: dict[str, list[int]] = {}
    ends: dict[int, int] = {}
    for close in _CLOSE.finditer(text):
        closes.setdefault(close.group(1), []).append(close.start())
        ends[close.start()] = close.end()
    found: list[tuple[int, int, str]] = []
    after = 0
    for opening in _OPEN.finditer(text):
        if opening.start() < after:
            continue
        positions = closes.get(opening.group(1), [])
        index = bisect_right(positions, opening.end() - 1)
        if index < len(positions):
            end = ends[positions[index]]
            found.append((opening.start(), end, opening.group(1)))
            after = end
    return found


def _pieces(text: str) -> list[tuple[int, int, str | None]]:
    """The text as tagged blocks (their tag) and paragraphs between them (None), in order."""
    pieces: list[tuple[int, int, str | None]] = []
    position = 0
    for start, end, tag in _blocks(text):
        pieces += [(position + m.start(), position + m.end(), None) for m in _PARAGRAPH.finditer(text[position:start])]
        pieces.append((start, end, tag))
        position = end
    pieces += [(position + m.start(), position + m.end(), None) for m in _PARAGRAPH.finditer(text[position:])]
    return pieces


def text_units(text: str) -> frozenset[bytes]:
    """The repetition keys of a text: the whole of it, its tagged blocks and its paragraphs."""
    keys = (_key(text), *(_key(text[start:end]) for start, end, _ in _pieces(text)))
    return frozenset(key for key in keys if key is not None)


# What finds a text's repetition keys: ``text_units``, or a memo of it (a conversation's texts
# are the same at every summary of it: ``ExtractiveSummarizer`` keeps them with its analyses).
Units = Callable[[str], frozenset[bytes]]


def text_parts(content: Any) -> Iterable[str]:
    """The texts of a message's content: the string, or its text parts."""
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
                yield part["text"]


def message_units(message: Mapping[str, Any], units_of: Units = text_units) -> frozenset[bytes]:
    """The repetition keys of a message's texts; none for a role where repetition is not counted."""
    if message.get("role") not in SCAFFOLDING_ROLES:
        return frozenset()
    texts = list(text_parts(message.get("content")))
    if len(texts) == 1:
        return units_of(texts[0])
    return frozenset().union(*(units_of(text) for text in texts))


def repeated_texts(messages: Iterable[Mapping[str, Any]], units_of: Units = text_units) -> frozenset[bytes]:
    """The keys of the texts that appear in two or more user or system messages."""
    seen: set[bytes] = set()
    repeated: set[bytes] = set()
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        units = message_units(message, units_of)
        repeated |= units & seen
        seen |= units
    return frozenset(repeated)


def repeated_in(
    messages: Sequence[Mapping[str, Any]], context: Sequence[Mapping[str, Any]] = (), units_of: Units = text_units
) -> frozenset[bytes]:
    """``repeated_texts`` of ``context`` and ``messages``, each message object counted once."""
    counted = {id(m): m for m in (*context, *messages) if isinstance(m, Mapping)}
    return repeated_texts(counted.values(), units_of)


# What finds the repeated keys of ``messages`` and their ``context``: ``repeated_in``, or a
# summariser's scans that go on from the last one (``ctxproxy.summarize.repeats``).
Repeated = Callable[[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]], frozenset[bytes]]


def _dropped(text: str, piece: tuple[int, int, str | None], repeated: frozenset[bytes]) -> bool:
    start, end, tag = piece
    return tag in WRAPPER_TAGS or (bool(repeated) and _key(text[start:end]) in repeated)


def strip_text(text: str, repeated: frozenset[bytes] = frozenset(), *, beside_others: bool = False) -> str:
    """``text`` without its wrapper blocks and without the texts whose keys are in ``repeated``;
    the whole of it goes when it repeats and is a part ``beside_others`` of its message."""
    if not repeated and "<" not in text:
        return text  # no wrapper block, nothing repeated: the common case
    if beside_others and repeated and _key(text) in repeated:
        return ""
    pieces = _pieces(text)
    drop = [_dropped(text, piece, repeated) for piece in pieces]
    for i in range(len(pieces) - 1):  # a heading line that introduces a dropped wrapper block
        start, end, tag = pieces[i]
        if tag is None and drop[i + 1] and pieces[i + 1][2] in WRAPPER_TAGS and _HEADING.fullmatch(text[start:end]):
            drop[i] = True
    if not any(drop):
        return text
    kept, position = [], 0
    for (start, end, _), dropped in zip(pieces, drop, strict=True):
        if dropped:
            kept.append(text[position:start])
            position = end
    kept.append(text[position:])
    return _BLANK_RUNS.sub("\n\n", "".join(kept)).strip()


def _content(content: Any, repeated: frozenset[bytes]) -> Any:
    if isinstance(content, str):
        return strip_text(content, repeated)
    if not isinstance(content, list):
        return content
    parts: list[Any] = []
    beside_others = sum(1 for _ in text_parts(content)) > 1
    for part in content:
        if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
            text = strip_text(part["text"], repeated, beside_others=beside_others)
            if text != part["text"]:
                if not text:
                    continue
                part = {**part, "text": text}
        parts.append(part)
    return parts


def strip_scaffolding(
    messages: Sequence[Mapping[str, Any]],
    context: Sequence[Mapping[str, Any]] = (),
    units_of: Units = text_units,
    *,
    repeated: frozenset[bytes] | None = None,
) -> list[Mapping[str, Any]]:
    """``messages`` without scaffolding (see the module docstring); ``context``: the whole
    conversation they are part of, read only to count repetitions (``units_of``: what finds a
    text's repetition keys), unless ``repeated`` says what ``repeated_in`` would find there.
    Unchanged messages are the same objects; changed ones are copies."""
    if repeated is None:
        repeated = repeated_in(messages, context, units_of)
    out: list[Mapping[str, Any]] = []
    for message in messages:
        role = message.get("role") if isinstance(message, Mapping) else None
        if role not in SCAFFOLDING_ROLES and role not in RESULT_ROLES:
            out.append(message)
            continue
        content = message.get("content")
        cleaned = _content(content, repeated if role in SCAFFOLDING_ROLES else frozenset())
        if cleaned == content:
            out.append(message)
        elif role == ROLE_USER and not cleaned:
            continue
        else:
            out.append({**message, "content": cleaned})
    return out

"""Memory documents (note 001's memory cards, plus archived pages) and their deterministic extractors.

Pure: no I/O, no clock (the caller passes ``now``).

A ``MemoryCard`` is one searchable document. ``kind="card"``: one statement worth
remembering (``type`` goal / decision / constraint / todo / code / fact). ``kind="page"``: the
text of one archived page (an interaction: a user message and what answered it), so that a
search can find the page itself and the model can recall it.

The card id is a short hash of the *normalised* content (case, whitespace and punctuation
folded), so "We chose Postgres." and "we chose postgres" are one card however often a rolling
summary repeats them. A page's id hashes its number with its text, so re-archiving the same
page is idempotent while two pages that happen to read the same stay apart.

Extractors:

- ``cards_from_summary``: one card per bullet / code block of a summary body; the section
  gives the type (Goal and Requests → goal, Background, Key facts, Commands and Errors → fact,
  Constraints → constraint, Decisions → decision, TODOs / next steps → todo, Important
  snippets → code; Files skipped).
- ``cards_from_messages``: for the paged strategy's archived pages, where there is no
  summary: the few most informative sentences of the page (by ``content_score`` +
  ``fact_score`` of ``ctxproxy.summarize.sentences``; questions and small talk skipped), typed by
  cue words, each prefixed with its speaker.
- ``page_doc``: the page rendered as ``User: …`` / ``Assistant: …`` lines.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ctxproxy.memory.card_tags import tags_of
from ctxproxy.memory.card_types import CARD_TYPES, CardType, card_type
from ctxproxy.memory.facts import as_fact, small_talk
from ctxproxy.session.lineage import Lineage
from ctxproxy.strategies.dates import format_day, iso_day, without_date_lines
from ctxproxy.summarize.base import SECTIONS
from ctxproxy.summarize.body import parse_body
from ctxproxy.summarize.sentences import (
    cjk_count,
    content_score,
    fact_score,
    is_question,
    sentences,
    split_code,
)
from ctxproxy.summarize.transcript import content_text, tool_calls
from ctxproxy.vocabulary import ROLE_ASSISTANT, ROLE_FUNCTION, ROLE_TOOL, ROLE_USER, SYSTEM_ROLES

__all__ = [
    "CARD_TYPES",
    "CardType",
    "DocKind",
    "MemoryCard",
    "card_id",
    "card_type",
    "cards_from_messages",
    "dedupe",
    "doc_label",
    "cards_from_summary",
    "new_card",
    "normalise",
    "page_doc",
    "page_id",
    "page_text",
    "speaker_of",
]

DocKind = Literal["card", "page"]

PAGE_MAX_CHARS: Final = 6000
TOOL_RESULT_MAX_CHARS: Final = 1500  # one tool result cannot push the conversation out of its page
TOOL_ARGS_MAX_CHARS: Final = 300
CARD_MAX_CHARS: Final = 600
CODE_CARD_MAX_CHARS: Final = 1200
MAX_CARDS_PER_PAGE: Final = 3
MAX_SENTENCES_PER_MESSAGE: Final = 20
_ID_BYTES: Final = 8

_SECTION_TYPES: Final[dict[str, CardType]] = {
    "Goal": "goal",
    "Requests": "goal",
    "Background": "fact",
    "Key facts": "fact",
    "Constraints": "constraint",
    "Decisions": "decision",
    "Commands": "fact",
    "Errors": "fact",
    "TODOs / next steps": "todo",
    "Important snippets": "code",
}

_ROLE_LABELS: Final = {ROLE_USER: "User", ROLE_ASSISTANT: "Assistant", ROLE_TOOL: "Tool", ROLE_FUNCTION: "Tool"}
# "Caroline: text" / "Dr. Smith: text": a speaker label the client put in the content itself.
_LABEL: Final = re.compile(r"^\s*([A-Z][\w.'’-]*(?: [A-Z][\w.'’-]*){0,2}):\s+(?=\S)")


# --- the document -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryCard:
    id: str
    content: str
    type: CardType
    tags: tuple[str, ...]
    created_at: float
    source: str
    page: int | None = None
    kind: DocKind = "card"
    vector: tuple[float, ...] | None = None
    lineage: tuple[Lineage, ...] = ()  # written by an anonymous request: whose it is (ctxproxy.session.lineage)
    when: str | None = None  # the exchange's date as the conversation states it (ISO), None: not stated
    history: tuple[str, ...] = ()  # what older cards it superseded said, oldest first (memory.supersede)

    def to_json(self) -> dict[str, Any]:
        """The stored shape (PLAN.md); ``vector`` only when there is one, rounded (cosine
        ranking does not need more than four decimals, and the layer value stays smaller);
        ``lineage`` (``[[n, "<prefix hash hex>"], ...]``) only when there is one."""
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "content": self.content,
            "type": self.type,
            "tags": list(self.tags),
            "created_at": self.created_at,
            "source": self.source,
            "page": self.page,
        }
        if self.vector is not None:
            out["vector"] = [round(x, 4) for x in self.vector]
        if self.lineage:
            out["lineage"] = [lineage.to_json() for lineage in self.lineage]
        if self.when is not None:
            out["when"] = self.when
        if self.history:
            out["history"] = list(self.history)
        return out

    @classmethod
    def from_json(cls, value: Any) -> MemoryCard | None:
        """The card a stored object describes, or None when it is not one (corrupt data is skipped)."""
        if not isinstance(value, Mapping):
            return None
        content, kind, type_ = value.get("content"), value.get("kind", "card"), value.get("type", "fact")
        if not isinstance(content, str) or not content or kind not in ("card", "page") or type_ not in CARD_TYPES:
            return None
        ident, page, created = value.get("id"), value.get("page"), value.get("created_at", 0.0)
        if page is not None and (not isinstance(page, int) or isinstance(page, bool)):
            return None
        if not isinstance(created, (int, float)) or isinstance(created, bool):
            return None
        tags = value.get("tags") or []
        source = value.get("source")
        vector = value.get("vector")
        if vector is not None and not (
            isinstance(vector, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector)
        ):
            vector = None
        lineage = value.get("lineage")
        when, history = value.get("when"), value.get("history")
        return cls(
            id=ident if isinstance(ident, str) and ident else card_id(content),
            content=content,
            type=type_,
            tags=tuple(tag for tag in tags if isinstance(tag, str)) if isinstance(tags, list) else (),
            created_at=float(created),
            source=source if isinstance(source, str) else "",
            page=page,
            kind=kind,
            vector=tuple(float(x) for x in vector) if vector else None,
            lineage=tuple(found for raw in lineage if (found := Lineage.from_json(raw)) is not None)
            if isinstance(lineage, list)
            else (),
            when=when if isinstance(when, str) and iso_day(when) is not None else None,
            history=tuple(old for old in history if isinstance(old, str)) if isinstance(history, list) else (),
        )


def doc_label(doc: MemoryCard) -> str:
    """Where a document is from, as shown beside it: ``page 12``, ``fact, page 12``, with the
    exchange's stated date after it when known (``page 12, 8 May 2023``)."""
    parts: list[str] = [] if doc.kind == "page" else [doc.type]
    parts += [f"page {doc.page}"] if doc.page is not None else []
    parts += [format_day(doc.when)] if doc.when is not None else []
    return ", ".join(parts) or doc.type


def normalise(content: str) -> str:
    """The de-duplication form of a text: Unicode-compatible forms unified (NFKC: full-width
    letters, ligatures), case folded, punctuation and symbols turned into spaces, runs of
    whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", content).casefold()
    kept = [" " if unicodedata.category(ch)[0] in "PSZC" else ch for ch in folded]
    return " ".join("".join(kept).split())


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=_ID_BYTES).hexdigest()


def card_id(content: str) -> str:
    """The card's id: 16 hex digits of the normalised content's hash (the de-duplication key)."""
    return _digest(normalise(content))


def page_id(page: int, content: str) -> str:
    return "p" + _digest(f"page {page}\n{normalise(content)}")[1:]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def new_card(
    content: str,
    type_: CardType,
    source: str,
    now: float,
    page: int | None,
    speaker: str | None = None,
    when: str | None = None,
) -> MemoryCard:
    """A card of ``content`` (clipped), tagged with its salient words (``speaker`` first);
    ``when``: the exchange's stated date (ISO)."""
    limit = CODE_CARD_MAX_CHARS if type_ == "code" else CARD_MAX_CHARS
    content = _clip(content.strip(), limit)
    return MemoryCard(card_id(content), content, type_, tags_of(content, speaker), now, source, page, when=when)


def dedupe(cards: list[MemoryCard]) -> list[MemoryCard]:
    """The first card of each id, in order."""
    seen: dict[str, MemoryCard] = {}
    for card in cards:
        seen.setdefault(card.id, card)
    return list(seen.values())


# --- from a summary body ------------------------------------------------------------------------


def _item_text(item: str) -> str:
    """A body item as card content: a bullet's text on one line; a code block kept as it is."""
    if item.lstrip().startswith("```"):
        return item.strip()
    text = item[2:] if item.startswith("- ") else item
    return " ".join(text.split())


def cards_from_summary(body: str, source: str, now: float) -> list[MemoryCard]:
    """One card per item of the summary ``body``, typed by its section, in section order, de-duplicated."""
    parsed = parse_body(body)
    cards: list[MemoryCard] = []
    for section in SECTIONS:
        for item in parsed.sections.get(section, []):
            text = _item_text(item)
            if not normalise(text):
                continue
            type_ = "code" if text.startswith("```") else _SECTION_TYPES[section]
            cards.append(new_card(text, type_, source, now, None))
    return dedupe(cards)


# --- from raw messages --------------------------------------------------------------------------


def speaker_of(message: Mapping[str, Any]) -> tuple[str, str | None]:
    """``(label, name)``: the message's ``name``, else a leading ``Name:`` label of its content,
    else its role (``User``, ``Assistant``, ``Tool``); ``name`` is None when only the role is known."""
    name = message.get("name")
    if isinstance(name, str) and name.strip():
        return name.strip(), name.strip()
    content = message.get("content")
    label = _LABEL.match(without_date_lines(content)) if isinstance(content, str) else None
    if label:
        return label.group(1), label.group(1)
    role = message.get("role")
    return _ROLE_LABELS.get(role, str(role).capitalize()) if isinstance(role, str) else "Unknown", None


_SUBJECTS: Final = {ROLE_USER: "the user", ROLE_ASSISTANT: "the assistant"}


def _candidates(
    message: Mapping[str, Any], when: str | None, addressee: str | None, skip: Collection[str]
) -> list[tuple[int, str, CardType, str | None]]:
    """``(score, card text, type, speaker name)`` of the sentences and code of one message; the
    type is read from the sentence alone, so a speaker called Will is no todo. Each sentence
    becomes a fact of its own (``facts.as_fact``): said by the speaker's name, else by the user
    or the assistant, to ``addressee``."""
    label, name = speaker_of(message)
    subject = name or _SUBJECTS.get(str(message.get("role")), label)
    text = without_date_lines(content_text(message.get("content")))
    if name is not None and text.startswith(f"{name}:"):
        text = text[len(name) + 1 :]
    prose, snippets = split_code(text)
    found: list[tuple[int, str, CardType, str | None]] = []
    for sentence in sentences(prose)[:MAX_SENTENCES_PER_MESSAGE]:
        if normalise(sentence) in skip:
            continue
        if is_question(sentence) or (content_score(sentence) < 2 or small_talk(sentence)) and cjk_count(sentence) < 4:
            continue
        score = content_score(sentence) + fact_score(sentence)
        found.append((score, as_fact(sentence, subject, when, addressee), card_type(sentence), name))
    found += [(3, f"{label}: {snippet.render()}", "code", name) for snippet in snippets]
    return found


def _addressees(messages: Sequence[Mapping[str, Any]]) -> list[str | None]:
    """Whom each message speaks to: the nearest other speaker before it, else after it (the
    user and the assistant speak to each other)."""
    names = [speaker_of(m)[1] or _SUBJECTS.get(str(m.get("role"))) for m in messages]
    found: list[str | None] = []
    for i, own in enumerate(names):
        others = [n for n in [*reversed(names[:i]), *names[i + 1 :]] if n is not None and n != own]
        found.append(others[0] if others else None)
    return found


def cards_from_messages(
    messages: Sequence[Mapping[str, Any]],
    source: str,
    now: float,
    page: int | None,
    when: str | None = None,
    skip: Collection[str] = frozenset(),
) -> list[MemoryCard]:
    """At most ``MAX_CARDS_PER_PAGE`` cards: the best-scoring sentences and code of the user and
    assistant messages (ties: earlier first), in conversation order, typed by cue words;
    ``when``: the exchange's stated date (ISO); ``skip``: sentences (``normalise``d) taken elsewhere."""
    spoken = [m for m in messages if isinstance(m, Mapping) and m.get("role") in (ROLE_USER, ROLE_ASSISTANT)]
    pool: list[tuple[int, int, str, CardType, str | None]] = []
    for message, addressee in zip(spoken, _addressees(spoken), strict=True):
        for score, text, type_, name in _candidates(message, when, addressee, skip):
            pool.append((score, len(pool), text, type_, name))
    best = sorted(pool, key=lambda c: (-c[0], c[1]))[:MAX_CARDS_PER_PAGE]
    chosen = sorted(best, key=lambda c: c[1])
    return dedupe([new_card(text, type_, source, now, page, name, when) for _, _, text, type_, name in chosen])


# --- the page itself ----------------------------------------------------------------------------


def _line(message: Mapping[str, Any]) -> list[str]:
    role = message.get("role")
    if not isinstance(role, str):
        return []
    label = "System" if role in SYSTEM_ROLES else _ROLE_LABELS.get(role, role.capitalize())
    name = message.get("name")
    if isinstance(name, str) and name.strip() and label != "Tool":
        label = f"{label} ({name.strip()})"
    text = " ".join(without_date_lines(content_text(message.get("content"))).split())  # shown beside it
    if label == "Tool":
        text = _clip(text, TOOL_RESULT_MAX_CHARS)
    lines = [f"{label}: {text}"] if text else []
    for tool, arguments in tool_calls(message):
        lines.append(f"{label} called {tool}({_clip(' '.join(arguments.split()), TOOL_ARGS_MAX_CHARS)})")
    return lines


def page_text(messages: Sequence[Mapping[str, Any]], max_chars: int = PAGE_MAX_CHARS) -> str:
    """The page as ``User: …`` / ``Assistant (name): …`` / ``Assistant called f(args)`` /
    ``Tool: …`` lines, at most ``max_chars`` characters."""
    lines = [line for message in messages if isinstance(message, Mapping) for line in _line(message)]
    return _clip("\n".join(lines), max_chars)


def page_doc(
    page: int, messages: Sequence[Mapping[str, Any]], source: str, now: float, when: str | None = None
) -> MemoryCard:
    """The page as a document; ``when``: the exchange's stated date (ISO)."""
    content = page_text(messages) or f"(page {page} has no text)"
    return MemoryCard(page_id(page, content), content, "fact", (), now, source, page, kind="page", when=when)

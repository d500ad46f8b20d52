"""Newer cards over older ones (issue 27.3). Pure, English only.

``superseded(existing, fresh)`` is what a layer holds after ``fresh`` cards are written to it,
oldest first, each fresh card against everything before it:

- a *near-duplicate* of an older card (their search terms overlap by at least ``NEAR``,
  Jaccard) replaces it: the newer wording wins;
- a card that *contradicts* an older one replaces it: both state the same slot of the same
  subject (``slot``: where someone lives, works, who they are with, their age, or what
  someone's or the project's named thing is) with another value (no search term in common) — "Caroline lives in Boston."
  then "Caroline moved to Denver." — or the newer one ends it ("Caroline quit Google." ends
  "Caroline works at Google.").

The replaced card is not shown beside the new one any more: its text goes, oldest first, into
the new card's ``history`` (at most ``MAX_HISTORY``, with the older card's own history before
it). Only cards sharing a tag with the new one (``MemoryCard.tags``: its speaker and salient
words) or its first word are compared, so a write into a full layer stays cheap. Pages, and cards of other
subjects or slots, are never touched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from ctxproxy.memory.cards import MemoryCard, normalise
from ctxproxy.memory.facts import REPORTED
from ctxproxy.memory.text import terms

__all__ = ["MAX_HISTORY", "NEAR", "slot", "superseded"]

NEAR: Final = 0.8
MAX_HISTORY: Final = 5

_SUBJECT: Final = r"(?P<subject>(?:[Tt]he (?:user|assistant|project|team)|[Ww]e|[A-Z][\w-]*(?: [A-Z][\w-]*)?))"
_LEAD: Final = r"(?:\s+(?:still|now|currently|recently|finally|just|also|has|have|had|is|are|was))*\s+"
# (slot, the verbs that set it, the verbs that end it)
_SLOTS: Final = (
    (
        "home",
        r"lives? in|living in|resides? in|based in|moved to|relocated to|moving to|settled in",
        r"moved out of",
    ),
    (
        "work",
        r"works? (?:at|for|as)|working (?:at|for)|(?:got|took|started) a (?:new )?job (?:at|with)|joined"
        r"|employed (?:at|by)|started (?:working )?at",
        r"quit|left|no longer works? (?:at|for)|stopped working (?:at|for)|(?:got )?laid off from|retired from",
    ),
    ("partner", r"married to|dating|engaged to|together with|in a relationship with", r"broke up with|divorced|split"),
    ("age", r"(?=\d+ years old)|turned", r"(?!)"),
)
_VERB: Final = tuple(
    (name, re.compile(f"^{_SUBJECT}{_LEAD}(?:(?P<end>{ends})|(?:{sets}))\\s*(?P<value>[^.,;!?]*)"))
    for name, sets, ends in _SLOTS
)
# "Caroline's favourite colour is blue." / "The deadline is now Friday." / "The database was changed to MySQL."
_NAMED: Final = re.compile(
    r"^(?P<subject>[A-Z][\w-]*(?:['’]s)|[Tt]he|[Oo]ur|[Tt]heir)\s+(?P<thing>(?:[\w'’]+\s+){0,2}?[\w'’]+)\s+"
    r"(?:is|was|are)(?:\s+(?:now|still))?(?:\s+(?:changed|moved|switched|set|updated) to)?\s+(?P<value>[^.,;!?]+)"
)
# "We use Jenkins for CI." / "We switched to GitHub Actions for CI.": what is used for a purpose.
_USED_FOR: Final = re.compile(
    rf"^{_SUBJECT}(?:\s+\w+)?\s+(?:use[sd]?|using|switched to|moved to|migrated to|chose|picked|went with)\s+"
    r"(?P<value>[^.,;!?]+?)\s+for\s+(?P<thing>[^.,;!?]+)"
)
_TRAILING_DAY: Final = re.compile(r"\s+(?:on|in|since|last|this|next)\b.*$")


def _value(text: str) -> str:
    return normalise(_TRAILING_DAY.sub("", text))


def slot(content: str) -> tuple[str, str, str | None] | None:
    """``(subject, slot, value)`` of a card's sentence, value None when it ends the slot; None
    when the sentence states no slot. Reported words ("Jon said that …") are read as said."""
    content = REPORTED.sub("", content)
    for name, pattern in _VERB:
        found = pattern.match(content)
        if found is not None:
            value = None if found.group("end") else _value(found.group("value"))
            if value != "":
                return normalise(found.group("subject")), name, value
    used = _USED_FOR.match(content)
    if used is not None:
        return normalise(used.group("subject")), "for " + _value(used.group("thing")), _value(used.group("value"))
    named = _NAMED.match(content)
    if named is not None and _value(named.group("value")):
        subject = named.group("subject").removesuffix("'s").removesuffix("’s")
        return normalise(subject), normalise(named.group("thing")), _value(named.group("value"))
    return None


def _near(new_terms: frozenset[str], old: MemoryCard) -> bool:
    old_terms = frozenset(terms(old.content))
    return bool(new_terms) and len(new_terms & old_terms) / len(new_terms | old_terms) >= NEAR


def _contradicts(new_slot: tuple[str, str, str | None], old: MemoryCard) -> bool:
    old_slot = slot(old.content)
    if old_slot is None or new_slot[:2] != old_slot[:2] or old_slot[2] is None:
        return False
    return new_slot[2] is None or not frozenset(terms(new_slot[2])) & frozenset(terms(old_slot[2]))


def _keys(card: MemoryCard) -> set[str]:
    """What a card that could replace ``card`` shares with it: a tag, or the first word it states."""
    content = card.content
    if " said" in content[:70]:
        content = REPORTED.sub("", content, count=1)
    return {tag.casefold() for tag in (*card.tags, *content.split(maxsplit=1)[:1])}


def _replaced(new: MemoryCard, kept: list[MemoryCard], known: dict[int, set[str]]) -> list[MemoryCard]:
    """The cards of ``kept`` that ``new`` replaces: near-duplicates among those sharing two of its
    keys (a near-duplicate shares its salient words), contradicted ones among those sharing one."""
    keys, new_slot = known[id(new)], slot(new.content)
    new_terms = frozenset(terms(new.content))
    gone = []
    for old in kept:
        shared = len(keys & known.get(id(old), set()))
        if (
            old.id != new.id
            and shared
            and ((shared > 1 and _near(new_terms, old)) or (new_slot is not None and _contradicts(new_slot, old)))
        ):
            gone.append(old)
    return gone


def superseded(existing: Sequence[MemoryCard], fresh: Sequence[MemoryCard]) -> list[MemoryCard]:
    """``existing`` + ``fresh`` (oldest first) with every card a newer one replaces taken out and
    kept in that newer card's ``history``."""
    kept = list(existing)
    known = {id(old): _keys(old) for old in kept if old.kind == "card"}
    for new in fresh:
        if new.kind == "card":
            known[id(new)] = _keys(new)
            gone = _replaced(new, kept, known)
            if gone:
                history = [text for old in gone for text in (*old.history, old.content)] + list(new.history)
                keys = known[id(new)]
                new = replace(new, history=tuple(history[-MAX_HISTORY:]))
                known[id(new)] = keys
                kept = [old for old in kept if all(old is not g for g in gone)]
        kept.append(new)
    return kept

"""A speaker's sentence as a fact of its own: who, what and when — never a copy. Pure, English only.

``as_fact("I went to a support group yesterday.", "Caroline", "2023-05-08")`` is
``"Caroline went to a support group on 7 May 2023."``: the first person becomes the speaker
(``I`` → the name, ``my`` → the name's, ``I'm`` → the name is; a present-tense verb right after
it agrees: ``I love`` → ``Caroline loves``), and a day said relative to the exchange becomes the
day it was ("yesterday", "today", "tonight", "last night", "this morning"), when the exchange's
date is known. With ``addressee`` (the other speaker of the exchange) the second person
becomes them too (``you`` → ``Melanie``, ``your`` → ``Melanie's``, ``you're`` → ``Melanie is``).
Leading interjections go ("Wow, ", "Oh yeah, "). A sentence with neither person is reported
as said, with its day when known: ``"The kids loved it."`` → ``"Caroline said on 8 May 2023
that the kids loved it."`` — an extractor cannot tell what it is about, so it does not guess.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from functools import partial
from typing import Final

from ctxproxy.memory.text import STOP_WORDS, irregular_form
from ctxproxy.strategies.dates import format_day, iso_day

__all__ = ["REPORTED", "as_fact", "small_talk"]

_FIRST: Final = re.compile(r"(?<![\w'’])(?:I|I['’](?:m|ve|d|ll)|my|My|me|mine|myself)(?![\w'’])")
_SECOND: Final = re.compile(r"(?<![\w'’])(?:[Yy]ou(?:['’](?:re|ve|d|ll))?|[Yy]ours?|[Yy]ourself)(?![\w'’])")
_CONTRACTIONS: Final = {"m": "is", "re": "is", "ve": "has", "d": "would", "ll": "will"}
# A "you" after one of these (or first) is a subject, so the verb after it agrees.
_CLAUSE: Final = frozenset("and but so if when because that since as while".split())
_INTERJECTION: Final = re.compile(
    r"^(?:(?:wow|oh|ooh|yeah|yep|yes|hey|hi|haha|lol|aw+|ah|hmm|well|ok|okay|omg|gosh|sure|cool|great|nice)"
    r"\b[,!.]*\s+)+",
    re.IGNORECASE,
)
_AGREES: Final = {"am": "is", "are": "is", "have": "has", "do": "does", "go": "goes", "was": "was", "were": "was"}
_UNCHANGED: Final = frozenset(
    "can could will would shall should may might must did had was don't didn't can't won't couldn't wouldn't "
    "shouldn't haven't hasn't wasn't isn't also just really still always never finally recently actually even "
    "usually often".split()
)
# The start of a fact that reports a speaker's words (``_said``).
REPORTED: Final = re.compile(r"^.{1,60}? said(?: on \d{1,2} \w+ \d{4})? that ")
_PREPOSITIONS: Final = frozenset("from since until till by before after of".split())
_ADVERBS: Final = frozenset("just really also still always never finally recently actually even usually often".split())
_DAYS: Final = (
    (re.compile(r"\byesterday\b|\blast night\b", re.I), -1),
    (re.compile(r"\btoday\b|\btonight\b|\bthis (?:morning|afternoon|evening)\b", re.I), 0),
)


# Words of thanks, praise and greeting: a sentence with fewer than two other words (names left
# out) says nothing worth remembering ("Thanks, Gina!", "Wow, Caroline, that sounds awesome!").
_SOCIAL: Final = frozenset(
    "thanks thank great awesome wow sounds sound cool nice glad hear amazing good congrats congratulations "
    "talk long time sure totally agree true absolutely hey hi hello bye care luck happy excited lovely "
    "wonderful fantastic incredible beautiful fun proud love appreciate means much lot hope soon see catch "
    "chat later same definitely yeah yes no oh ah haha lol bet awesome super so really too that's it".split()
)
_NAME: Final = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+\b")


def small_talk(sentence: str) -> bool:
    """Thanks, praise or a greeting, with fewer than two other words once names are left out."""
    words = re.findall(r"[a-z']+", _NAME.sub(" ", sentence).lower())
    return sum(1 for w in words if w not in _SOCIAL and w not in STOP_WORDS) < 2


def _agree(verb: str) -> str:
    """``verb`` after a third-person singular subject, as far as a suffix rule can tell."""
    lower = verb.lower()
    if lower in _AGREES:
        return _AGREES[lower]
    if lower in _UNCHANGED or lower.endswith(("ed", "n't")) or irregular_form(lower) or not lower.isalpha():
        return verb
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _subject(words: list[str], i: int, name: str) -> None:
    """``words[i]`` is "I" (``words`` alternates words and spaces): the name, and the verb after
    it (past one adverb) agreeing."""
    words[i] = name
    k = i + 2
    if k < len(words) and words[k].lower() in _ADVERBS:
        k += 2
    core = words[k].rstrip(".,!?;:") if k < len(words) else ""
    if core.isalpha() and core.islower():
        words[k] = _agree(core) + words[k][len(core) :]


def _person(words: list[str], i: int, core: str, tail: str, who: str, subject: bool) -> None:
    """``words[i]`` (``core`` + ``tail``) is a first or second person pronoun of ``who``."""
    if core in ("I", "you", "You") and not tail and subject:
        _subject(words, i, who)
        words[i] = who
    elif "'" in core or "’" in core:
        verb = _CONTRACTIONS[re.split(r"['’]", core)[1]]
        words[i] = f"{who} {verb}{tail}"
    elif core.lower() in ("my", "mine", "your", "yours"):
        words[i] = f"{who}'s{tail}"
    else:
        words[i] = who + tail


def _rewritten(sentence: str, name: str, addressee: str | None) -> str:
    """``sentence`` with its first person (and, given ``addressee``, its second) replaced."""
    words = re.split(r"(\s+)", sentence)  # words and the spaces between them
    for i, word in enumerate(words):
        core = word.rstrip(".,!?;:")
        tail = word[len(core) :]
        if _FIRST.fullmatch(core):
            _person(words, i, core, tail, name, core == "I")
        elif addressee is not None and _SECOND.fullmatch(core):
            before = words[i - 2].lower().rstrip(",") if i >= 2 else ""
            _person(words, i, core, tail, addressee, i == 0 or before in _CLAUSE or words[i - 2].endswith(","))
    return "".join(words)


def _said(sentence: str, name: str, day: date | None) -> str:
    """``sentence`` reported as ``name``'s words (on ``day``)."""
    first, _, rest = sentence.partition(" ")
    if first.lower() in STOP_WORDS or first in ("It's", "That's", "There's"):
        sentence = first.lower() + (" " + rest if rest else "")
    on = f" on {format_day(day.isoformat())}" if day is not None else ""
    return f"{name} said{on} that {sentence}"


def _on(match: re.Match[str], day: str) -> str:
    """``day`` in place of a relative day: "on 8 May 2023", or without "on" after a preposition."""
    before = match.string[: match.start()].split()
    return day if before and before[-1].lower() in _PREPOSITIONS else f"on {day}"


def _dated(text: str, day: date) -> str:
    """``text`` with the days it says relative to ``day`` as dates."""
    for pattern, offset in _DAYS:
        text = pattern.sub(partial(_on, day=format_day((day + timedelta(days=offset)).isoformat())), text)
    return text


def as_fact(sentence: str, name: str, when: str | None, addressee: str | None = None) -> str:
    """``sentence`` (said by ``name`` to ``addressee`` on ``when``, ISO) as a fact of its own."""
    sentence = _INTERJECTION.sub("", sentence).strip() or sentence
    day = iso_day(when) if when is not None else None
    day = day if day is not None and date.min < day else None
    rewritten = _rewritten(sentence, name, addressee)
    fact = _dated(rewritten, day) if day is not None else rewritten
    if rewritten == sentence:
        fact = _said(fact, name, day)
    return fact[:1].upper() + fact[1:]

"""A card's tags: a few salient words of its text. Pure.

``tags_of(content, first)``: ``first`` (the speaker), then names / acronyms / words with digits,
then the longest other words, then short CJK runs; stop words excluded, case kept.
"""

from __future__ import annotations

import re
from typing import Final

from ctxproxy.memory.text import STOP_WORDS

__all__ = ["MAX_TAGS", "tags_of"]

MAX_TAGS: Final = 4
_CJK: Final = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_CJK_WORD: Final = re.compile(f"(?<![{_CJK}])[{_CJK}]{{2,4}}(?![{_CJK}])")  # a whole short run: likely one word
_TAG_WORD: Final = re.compile(f"[^\\W_{_CJK}]+(?:[-.'’][^\\W_{_CJK}]+)*")


def _is_name(content: str, match: re.Match[str]) -> bool:
    """A proper name, acronym or number: capitalised but not just starting a sentence, all
    capitals, or containing a digit."""
    word = match.group()
    if any(c.isdigit() for c in word) or (len(word) > 1 and word.isupper()):
        return True
    before = content[: match.start()].rstrip()
    return word[0].isupper() and bool(before) and before[-1] not in ".!?:;\"'“(-–—"


def tags_of(content: str, first: str | None = None) -> tuple[str, ...]:
    """A few salient words: ``first`` (the speaker), then names / acronyms / words with digits,
    then the longest other words, then short CJK runs; stop words excluded, case kept."""
    matches = list(_TAG_WORD.finditer(content))
    names = [m.group() for m in matches if _is_name(content, m)]
    others = sorted(
        (m.group() for m in matches if len(m.group()) >= 5 and m.group() not in names), key=len, reverse=True
    )
    picked: dict[str, str] = {}
    for word in [*([first] if first else []), *names, *others, *_CJK_WORD.findall(content)]:
        key = word.casefold()
        if key not in STOP_WORDS and key not in picked:
            picked[key] = word
        if len(picked) == MAX_TAGS:
            break
    return tuple(picked.values())

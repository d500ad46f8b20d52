"""A card's type, read from its sentence's cue words. Pure.

``card_type``: code when the sentence quotes code; else the first of decision, constraint,
goal and todo whose cue words (whole words or phrases; a few CJK ones) it has; else a fact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, get_args

__all__ = ["CARD_TYPES", "CardType", "card_type"]

CardType = Literal["goal", "decision", "constraint", "todo", "code", "fact"]
CARD_TYPES: Final[tuple[CardType, ...]] = get_args(CardType)


@dataclass(frozen=True)
class _Cues:
    type: CardType
    words: tuple[str, ...]  # matched as whole words / phrases, lower case
    cjk: tuple[str, ...] = ()


# Checked in this order, after code; the first match wins; no match is a fact.
_CUES: Final = (
    _Cues("decision", ("decided", "decide to", "let's use", "let's go with", "we'll use", "chose", "going with",
                       "agreed", "settled on", "opted"), ("决定", "采用", "选定", "就用")),
    _Cues("constraint", ("must", "mustn't", "never", "always", "don't", "do not", "shouldn't", "should not"),
          ("必须", "不要", "不能", "禁止", "总是", "永远", "只能")),
    _Cues("goal", ("want to", "goal", "trying to", "aim to", "hoping to"), ("目标", "想要", "希望")),
    _Cues("todo", ("todo", "to-do", "next", "need to", "needs to", "will", "i'll", "we'll", "plan to"),
          ("待办", "下一步", "需要", "记得", "接下来", "计划")),
)  # fmt: skip
_CUE_PATTERNS: Final = tuple(
    (cues, re.compile(r"(?<![\w'])(?:" + "|".join(re.escape(w) for w in cues.words) + r")(?![\w'])")) for cues in _CUES
)


def card_type(sentence: str) -> CardType:
    """A sentence's type by its cue words (code when it quotes code; else a fact)."""
    if "`" in sentence:
        return "code"
    lower = sentence.lower().replace("’", "'")
    for cues, pattern in _CUE_PATTERNS:
        if pattern.search(lower) or (not lower.isascii() and any(cue in lower for cue in cues.cjk)):
            return cues.type
    return "fact"

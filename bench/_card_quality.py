"""What bench/recall.py's cards say (issue 27.3): how many copy their message word for word, and
how many repeat an earlier card of the same conversation.

A card is a *verbatim copy* when its text, less a leading ``Speaker:`` label, is (normalised:
case, punctuation and spacing folded) a piece of its page's text. It is a *duplicate* when its
search terms overlap an earlier card's of the same conversation by at least ``NEAR`` (Jaccard;
the same card twice is 1.0).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ctxproxy.memory.cards import cards_from_messages, normalise
from ctxproxy.memory.text import terms
from ctxproxy.strategies.dates import exchange_dates

NEAR = 0.8
_LABEL = re.compile(r"^[^:]{1,40}:\s+")


class _Page(Protocol):
    number: int
    messages: tuple[dict[str, Any], ...]


class _Conversation(Protocol):
    pages: tuple[_Page, ...]


@dataclass(frozen=True)
class CardQuality:
    cards: int
    verbatim: int
    duplicates: int

    def report(self) -> str:
        n = max(self.cards, 1)
        return (
            f"Cards ({self.cards:,}, up to three a page): verbatim copies of their message {self.verbatim / n:.1%} "
            f"({self.verbatim:,}); duplicates or near-duplicates (term overlap ≥ {NEAR}) of an earlier card "
            f"{self.duplicates / n:.1%} ({self.duplicates:,})."
        )


def card_quality(conversations: Sequence[_Conversation]) -> CardQuality:
    cards = verbatim = duplicates = 0
    for conv in conversations:
        history = [m for page in conv.pages for m in page.messages]
        ends = list(itertools.accumulate(len(page.messages) for page in conv.pages))
        seen: list[frozenset[str]] = []
        for page, when in zip(conv.pages, exchange_dates(history, ends), strict=True):
            text = normalise(" ".join(str(m.get("content", "")) for m in page.messages))
            for card in cards_from_messages(page.messages, "bench", 0.0, page.number, when):
                cards += 1
                verbatim += normalise(_LABEL.sub("", card.content)) in text
                words = frozenset(terms(card.content))
                duplicates += any(len(words & old) / max(len(words | old), 1) >= NEAR for old in seen)
                seen.append(words)
    return CardQuality(cards, verbatim, duplicates)

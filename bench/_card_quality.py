"""What bench/recall.py's cards say (issue 27.3): how many copy their message word for word, how
many repeat an earlier card of the same conversation, how many are reported words ("Caroline
said on 8 May 2023 that …": no first or second person to rewrite), how many the Store's write
replaces by a newer one (``memory.supersede``, the conversation's cards written page by page),
and how many of the hand-labelled contradictions of ``tests/fixtures/contradictions.json`` the
write resolves (``contradictions``: a contradicting pair's earlier card gone, a control's kept).

A card is a *verbatim copy* when its text, less a leading ``Speaker:`` label, is (normalised:
case, punctuation and spacing folded) a piece of its page's text. It is a *duplicate* when its
search terms overlap an earlier card's of the same conversation by at least ``NEAR`` (Jaccard;
the same card twice is 1.0).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ctxproxy.memory.cards import MemoryCard, cards_from_messages, normalise
from ctxproxy.memory.facts import REPORTED
from ctxproxy.memory.supersede import superseded
from ctxproxy.memory.text import terms
from ctxproxy.strategies.dates import exchange_dates

NEAR = 0.8
FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "contradictions.json"
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
    reported: int = 0
    replaced: int = 0

    def report(self) -> str:
        n = max(self.cards, 1)
        return (
            f"Cards ({self.cards:,}, up to three a page): verbatim copies of their message {self.verbatim / n:.1%} "
            f"({self.verbatim:,}); duplicates or near-duplicates (term overlap ≥ {NEAR}) of an earlier card "
            f"{self.duplicates / n:.1%} ({self.duplicates:,}); reported words {self.reported / n:.1%} "
            f"({self.reported:,}); replaced on writing by a newer card {self.replaced / n:.1%} ({self.replaced:,})."
        )


@dataclass(frozen=True)
class Contradictions:
    pairs: int
    resolved: int  # contradicting pairs whose earlier card the later one superseded
    controls: int
    kept: int  # controls whose earlier card stayed

    def report(self) -> str:
        return (
            f"Contradictions ({FIXTURE.name}, hand-labelled): {self.resolved} of {self.pairs} resolved "
            f"(the earlier card superseded); {self.kept} of {self.controls} controls kept both."
        )


def _said(speaker: str, text: str) -> list[dict[str, Any]]:
    said = {"role": "user", "content": text} | ({} if speaker == "user" else {"name": speaker})
    return [said, {"role": "assistant", "content": "Okay."}]


def contradictions(path: Path = FIXTURE) -> Contradictions:
    """Each pair's earlier and later statement archived as two pages, the later written over the earlier."""
    counts = {True: [0, 0], False: [0, 0]}
    for pair in json.loads(path.read_text())["pairs"]:
        earlier = cards_from_messages(_said(pair["speaker"], pair["earlier"]), "fixture", 1.0, 1, "2023-05-08")
        later = cards_from_messages(_said(pair["speaker"], pair["later"]), "fixture", 2.0, 2, "2023-06-08")
        gone = not set(earlier) & set(superseded(earlier, later))
        counts[pair["contradicts"]][0] += 1
        counts[pair["contradicts"]][1] += gone is pair["contradicts"]
    return Contradictions(counts[True][0], counts[True][1], counts[False][0], counts[False][1])


def card_quality(conversations: Sequence[_Conversation]) -> CardQuality:
    cards = verbatim = duplicates = reported = stored = 0
    for conv in conversations:
        history = [m for page in conv.pages for m in page.messages]
        ends = list(itertools.accumulate(len(page.messages) for page in conv.pages))
        seen: list[frozenset[str]] = []
        layer: list[MemoryCard] = []
        for page, when in zip(conv.pages, exchange_dates(history, ends), strict=True):
            text = normalise(" ".join(str(m.get("content", "")) for m in page.messages))
            made = cards_from_messages(page.messages, "bench", 0.0, page.number, when)
            for card in made:
                cards += 1
                verbatim += normalise(_LABEL.sub("", card.content)) in text
                reported += REPORTED.search(card.content) is not None
                words = frozenset(terms(card.content))
                duplicates += any(len(words & old) / max(len(words | old), 1) >= NEAR for old in seen)
                seen.append(words)
            layer = superseded(layer, [card for card in made if card not in layer])
        stored += len(layer)
    return CardQuality(cards, verbatim, duplicates, reported, cards - stored)

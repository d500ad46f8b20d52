"""The wide-context part of a page's score, only for the pages that can still reach a search's
top. Pure.

A page's wide context (``docs``: 25 pages around it) holds most of a conversation's words, so
its postings are the longest a search reads — about two thirds of them at 2,000 documents —
and they weigh least (``wide_weight``). Every page's score without it (its own text, its
context, its neighbours') is known first; with the time preference's factor that is a lower
bound of its final score, and the same plus ``weight`` times a bound of any wide-context
score (``QueryScorer.bound``) an upper bound. A page whose upper bound is below the
``top_k``-th best lower bound ranks below ``top_k`` pages whatever its wide score: it is left
out unscored. The others get their wide score from their own postings (bisection), added as
the full pass adds it, so every score kept is the same float. The bounds carry a margin of a
billionth for rounding (the final sums and products are rounded monotonically, the bound's
own arithmetic by a few units in the last place).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from heapq import nlargest

from ctxproxy.memory.bm25 import QueryScorer

__all__ = ["with_wide"]

_MARGIN = 1.0 + 1e-9


def with_wide(
    scores: Mapping[str, float],
    wide: QueryScorer[str],
    weight: float,
    top_k: int,
    factor: Callable[[str], float],
    top_factor: float,
) -> dict[str, float] | None:
    """``scores`` with ``weight`` times each page's wide score added, the pages that cannot
    reach the ``top_k`` best (once scaled by ``factor``, at most ``top_factor``) left out; None
    when that cannot be told without the full pass: fewer than ``top_k`` pages scored, no bound,
    or a page with no score but its wide one could reach the top."""
    bound = wide.bound()
    if bound is None or len(scores) < top_k:
        return None
    extra = weight * bound
    scaled = top_factor != 1.0  # else every factor is 1.0
    lows = (score * factor(doc_id) for doc_id, score in scores.items()) if scaled else scores.values()
    least = nlargest(top_k, lows)[-1]
    if not extra * top_factor * _MARGIN < least:  # (an infinite factor: no bound, not even of 0)
        return None
    kept: dict[str, float] = {}
    for doc_id, score in scores.items():
        if (score + extra) * (factor(doc_id) if scaled else 1.0) * _MARGIN < least:
            continue
        found = wide.score(doc_id)
        kept[doc_id] = score if found is None else score + weight * found
    return kept

"""Orders of scored keys: best first with recency breaking ties, and reciprocal-rank fusion of
several rankings. Pure."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from heapq import nlargest
from typing import TypeVar

__all__ = ["ranked", "rrf"]

K = TypeVar("K", bound=Hashable)


def ranked(
    scores: Mapping[K, float], recency: Mapping[K, float] | Callable[[K], float], top_k: int | None = None
) -> list[tuple[K, float]]:
    """``scores`` best first; equal scores newest first (missing recency counts as oldest), then
    in ``scores``' order. ``recency``: a table, or what a key's recency is. With ``top_k``, only
    the first ``top_k`` of that order: the scores below the ``top_k``-th best cannot be among
    them, so only the others are ordered (and their recency read)."""
    at = recency if callable(recency) else (lambda key: recency.get(key, float("-inf")))
    items: Iterable[tuple[K, float]] = scores.items()
    if top_k is not None and top_k < len(scores):
        least = nlargest(top_k, scores.values())[-1] if top_k > 0 else float("inf")
        items = [item for item in items if item[1] >= least]
    hits = sorted(items, key=lambda item: (-item[1], -at(item[0])))
    return hits if top_k is None else hits[:top_k]


def rrf(rankings: Sequence[Sequence[K]], k: int = 60) -> list[tuple[K, float]]:
    """Reciprocal-rank fusion: each ranking gives ``1 / (k + rank)`` (rank 1-based) to its keys;
    best fused score first, ties in order of first appearance. ``k`` damps the top ranks, so
    one ranking's first place cannot outvote agreement further down."""
    fused: dict[K, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda item: -item[1])

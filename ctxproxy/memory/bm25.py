"""BM25 over term lists, ranking with recency as the tie-breaker, and reciprocal-rank fusion. Pure.

Hand-written rather than taken from ``rank-bm25``, because memory search needs what that
library does not offer: documents arrive incrementally (one archived page at a time, per
layer), so an index is postings extended in place instead of a matrix rebuilt on every change; a
search runs over the *union* of several layer indexes (user, scope, session) with statistics
of the union and each document counted once; documents have weighted fields (BM25F-style:
a term's frequency is the weighted sum of its counts in the fields, and so is the length);
and equal scores must fall back to recency, newest first, which a score array cannot say.

Scoring: ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` (always positive, unlike the
classic Robertson idf, so a term in most documents still counts a little) and
``tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))``, summed over the distinct query
terms. Only postings of query terms are visited: a search costs the matching documents, not
the corpus.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from math import log
from typing import Generic, TypeVar

__all__ = ["BM25Index", "BM25Params", "bm25_scores", "ranked", "rrf", "search", "weighted_tf"]

K = TypeVar("K", bound=Hashable)
_FLOAT_BYTES = sys.getsizeof(0.5)
_INT_BYTES = sys.getsizeof(2**20)
_PAIR_BYTES = sys.getsizeof((0, 0))


@dataclass(frozen=True)
class BM25Params:
    """``k1``: how fast repeated terms saturate; ``b``: how much longer documents are penalised."""

    k1: float = 1.2
    b: float = 0.75


def weighted_tf(fields: Iterable[tuple[Iterable[str], float]]) -> dict[str, float]:
    """Term frequencies of a document made of ``(terms, weight)`` fields: weights multiply counts."""
    tf: dict[str, float] = {}
    for field_terms, weight in fields:
        if weight <= 0:
            continue
        for term in field_terms:
            tf[term] = tf.get(term, 0.0) + weight
    return tf


class BM25Index(Generic[K]):
    """Postings of one document set (one memory layer), compact: each document gets an ordinal
    in the order it was added, and a term's postings are two arrays sorted by ordinal (unsigned
    ints and 4-byte floats; 8-byte floats for a list with a count a float32 cannot hold
    exactly), 8-12 bytes a posting instead of a dict entry and a float object (~100). A
    document's counts can be replaced in place (``replace``): its postings keep their place,
    so an index extended that way iterates exactly as one built from scratch."""

    def __init__(self) -> None:
        self._keys: list[K] = []  # ordinal -> key
        self._ordinal: dict[K, int] = {}
        self._postings: dict[str, tuple[array[int], array[float]]] = {}
        self._length: dict[K, float] = {}
        self._recency: dict[K, float] = {}
        self.total_length = 0.0

    def add(self, key: K, tf: Mapping[str, float], recency: float = 0.0) -> bool:
        """Index one document; its length is the sum of ``tf``. False (ignored) if ``key`` is known."""
        if key in self._length:
            return False
        ordinal = self._ordinal[key] = len(self._keys)
        self._keys.append(key)
        length = 0.0
        for term, count in tf.items():
            if count > 0:
                self._set(term, ordinal, count)
                length += count
        self._length[key] = length
        self._recency[key] = recency
        self.total_length += length
        return True

    def remove(self, key: K, tf: Mapping[str, float]) -> None:
        """Take out a known document, indexed with ``tf``; the others keep their order."""
        ordinal = self._ordinal.pop(key)
        for term, count in tf.items():
            if count > 0:
                self._drop(term, ordinal)
        self.total_length -= self._length.pop(key)
        del self._recency[key]

    def replace(self, key: K, old: Mapping[str, float], new: Mapping[str, float]) -> None:
        """A known document's term counts are ``new`` instead of ``old`` (what it was indexed
        with); it keeps its ordinal, so postings iterate as if it had been added with ``new``."""
        ordinal = self._ordinal[key]
        for term, count in old.items():
            if count > 0 and new.get(term, 0.0) <= 0:
                self._drop(term, ordinal)
        length = 0.0
        for term, count in new.items():
            if count > 0:
                self._set(term, ordinal, count)
                length += count
        self.total_length += length - self._length[key]
        self._length[key] = length

    def _set(self, term: str, ordinal: int, count: float) -> None:
        found = self._postings.get(term)
        if found is None:
            found = self._postings[term] = (array("I"), array("f"))
        ords, tfs = found
        at = len(ords) if not ords or ords[-1] < ordinal else bisect_left(ords, ordinal)
        if at < len(ords) and ords[at] == ordinal:
            tfs[at] = count
        else:
            ords.insert(at, ordinal)
            tfs.insert(at, count)
        if tfs[at] != count:  # not exact as a float32: this term's counts become doubles
            tfs = array("d", tfs)
            tfs[at] = count
            self._postings[term] = (ords, tfs)

    def _drop(self, term: str, ordinal: int) -> None:
        ords, tfs = self._postings[term]
        at = bisect_left(ords, ordinal)
        del ords[at], tfs[at]
        if not ords:
            del self._postings[term]

    def __len__(self) -> int:
        return len(self._length)

    def __contains__(self, key: object) -> bool:
        return key in self._length

    def keys(self) -> Iterable[K]:
        return self._length.keys()

    def nbytes(self) -> int:
        """Estimated bytes this index holds (for the cache that keeps it): the postings arrays
        and their pairs, the tables of ordinals, lengths and recencies and their floats. Term
        strings and document keys belong to the documents, so they are not counted here."""
        arrays = sum(sys.getsizeof(ords) + sys.getsizeof(tfs) for ords, tfs in self._postings.values())
        pairs = len(self._postings) * _PAIR_BYTES
        tables = sum(sys.getsizeof(t) for t in (self._postings, self._keys, self._ordinal, self._length, self._recency))
        return arrays + pairs + tables + len(self._keys) * (_INT_BYTES + 2 * _FLOAT_BYTES)

    def postings(self, term: str) -> Iterator[tuple[K, float]]:
        """(key, count) of the documents that have ``term``, in the order they were added."""
        found = self._postings.get(term)
        if found is None:
            return iter(())
        return zip(map(self._keys.__getitem__, found[0]), found[1], strict=True)

    def length(self, key: K) -> float:
        return self._length[key]

    def recency(self, key: K) -> float:
        return self._recency[key]


def _owner(key: K, indexes: Sequence[BM25Index[K]], before: int) -> bool:
    """True if ``key`` is already in one of the first ``before`` indexes (it counts there)."""
    return any(key in indexes[j] for j in range(before))


def bm25_scores(
    query: Iterable[str], indexes: Sequence[BM25Index[K]], params: BM25Params = BM25Params()
) -> dict[K, float]:
    """The BM25 score of every document that contains a query term, over the union of
    ``indexes``. A key in several indexes counts once, as the first index has it."""
    n = 0
    total = 0.0
    for i, index in enumerate(indexes):
        if i == 0:
            n, total = len(index), index.total_length
            continue
        for key in index.keys():
            if not _owner(key, indexes, i):
                n += 1
                total += index.length(key)
    if n == 0:
        return {}
    avg = total / n if total > 0 else 1.0
    scores: dict[K, float] = {}
    for term in dict.fromkeys(query):
        matches = [
            (key, tf, index)
            for i, index in enumerate(indexes)
            for key, tf in index.postings(term)
            if i == 0 or not _owner(key, indexes, i)
        ]
        if not matches:
            continue
        df = len(matches)
        idf = log(1.0 + (n - df + 0.5) / (df + 0.5))
        for key, tf, index in matches:
            norm = params.k1 * (1.0 - params.b + params.b * index.length(key) / avg)
            scores[key] = scores.get(key, 0.0) + idf * tf * (params.k1 + 1.0) / (tf + norm)
    return scores


def ranked(scores: Mapping[K, float], recency: Mapping[K, float]) -> list[tuple[K, float]]:
    """``scores`` best first; equal scores newest first (missing recency counts as oldest)."""
    return sorted(scores.items(), key=lambda item: (-item[1], -recency.get(item[0], float("-inf"))))


def search(
    query: Iterable[str],
    indexes: Sequence[BM25Index[K]],
    params: BM25Params = BM25Params(),
    top_k: int | None = None,
) -> list[tuple[K, float]]:
    """BM25 over the union of ``indexes``, best first, recency breaking ties."""
    scores = bm25_scores(query, indexes, params)
    recency: dict[K, float] = {}
    for index in indexes:
        for key in scores:
            if key in index and key not in recency:
                recency[key] = index.recency(key)
    hits = ranked(scores, recency)
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

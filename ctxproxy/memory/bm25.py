"""BM25 over term lists (ranked with recency as the tie-breaker by ``ranking``). Pure.

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
the corpus. The statistics of a union of several indexes (how many documents, their mean length,
which keys an earlier index already has) are kept with the last index until one of them changes,
so a search of a session layer under user and scope layers does not walk their keys each time.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from math import log
from typing import Generic, TypeVar

from ctxproxy.memory.ranking import ranked

__all__ = ["BM25Index", "BM25Params", "QueryScorer", "bm25_scores", "search", "weighted_tf"]

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
        self._lengths: list[float] = []  # ordinal -> length (what the scoring loop reads)
        self._recency: dict[K, float] = {}
        self.total_length = 0.0
        self._stamp = object()  # replaced at every change: what a union's memo is told by
        self._union: tuple[tuple[object, ...], _Union[K]] | None = None  # (the union's stamps, its statistics)
        # The postings arrays' bytes at the last ``nbytes`` (None before it), and the bytes of each
        # term's arrays before its first change since then (0: a new term): ``nbytes`` adds the
        # difference instead of walking every term again.
        self._arrays_bytes: int | None = None
        self._touched: dict[str, int] = {}
        # Each ordinal's length term of the BM25 denominator, ``k1 * (1 - b + b * length / avg)``,
        # for the last (stamp, k1, b, avg) a query scored every document with (``norms``).
        self._norms: tuple[tuple[object, float, float, float], array[float]] | None = None
        # The shortest length and each term's highest count asked since the last change (``bound``).
        self._extremes: tuple[object, float, dict[str, float]] = (self._stamp, 0.0, {})

    def _changed(self) -> None:
        self._stamp = object()
        self._union = None

    def add(self, key: K, tf: Mapping[str, float], recency: float = 0.0) -> bool:
        """Index one document; its length is the sum of ``tf``. False (ignored) if ``key`` is known."""
        if key in self._length:
            return False
        ordinal = self._ordinal[key] = len(self._keys)
        self._keys.append(key)
        length = 0.0
        postings = self._postings
        for term, count in tf.items():
            if count > 0:
                # ``_set`` for an ordinal above every other (ordinals are never reused): appended.
                self._touch(term)
                found = postings.get(term)
                if found is None:
                    found = postings[term] = (array("I"), array("f"))
                ords, tfs = found
                ords.append(ordinal)
                tfs.append(count)
                if tfs[-1] != count:
                    tfs = array("d", tfs)
                    tfs[-1] = count
                    postings[term] = (ords, tfs)
                length += count
        self._length[key] = length
        self._lengths.append(length)
        self._recency[key] = recency
        self.total_length += length
        self._changed()
        return True

    def remove(self, key: K, tf: Mapping[str, float]) -> None:
        """Take out a known document, indexed with ``tf``; the others keep their order."""
        ordinal = self._ordinal.pop(key)
        self._drop((term for term, count in tf.items() if count > 0), ordinal)
        self.total_length -= self._length.pop(key)
        del self._recency[key]
        self._changed()

    def replace(self, key: K, old: Mapping[str, float], new: Mapping[str, float]) -> None:
        """A known document's term counts are ``new`` instead of ``old`` (what it was indexed
        with); it keeps its ordinal, so postings iterate as if it had been added with ``new``.
        Only the counts that differ are written (a page window moved by a page keeps most)."""
        ordinal = self._ordinal[key]
        self._drop((term for term, count in old.items() if count > 0 and new.get(term, 0.0) <= 0), ordinal)
        length = 0.0
        for term, count in new.items():
            if count > 0:
                if old.get(term) != count:
                    self._set(term, ordinal, count)
                length += count
        self.total_length += length - self._length[key]
        self._length[key] = length
        self._lengths[ordinal] = length
        self._changed()

    def _term_bytes(self, term: str) -> int:
        found = self._postings.get(term)
        return 0 if found is None else sys.getsizeof(found[0]) + sys.getsizeof(found[1])

    def _touch(self, term: str) -> None:
        if self._arrays_bytes is not None and term not in self._touched:
            self._touched[term] = self._term_bytes(term)

    def _set(self, term: str, ordinal: int, count: float) -> None:
        self._touch(term)
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

    def _drop(self, terms: Iterable[str], ordinal: int) -> None:
        """``ordinal``'s posting of each of ``terms`` taken out (a page window has ~1,000)."""
        postings = self._postings
        for term in terms:
            self._touch(term)
            ords, tfs = postings[term]
            at = bisect_left(ords, ordinal)
            del ords[at], tfs[at]
            if not ords:
                del postings[term]

    def norms(self, k1: float, b: float, avg: float) -> array[float]:
        """Each ordinal's ``k1 * (1 - b + b * length / avg)``, the floats the scoring formula
        computes per posting, kept until the index changes or another query asks other
        parameters (a search reads them once per matching posting; they change only at an
        archival). Not counted by ``nbytes`` (8 bytes a document, rebuilt when lost)."""
        asked = (self._stamp, k1, b, avg)
        if self._norms is not None and self._norms[0] == asked:
            return self._norms[1]
        rest = 1.0 - b
        norms = array("d", [k1 * (rest + b * length / avg) for length in self._lengths])
        self._norms = (asked, norms)
        return norms

    def extremes(self, term: str) -> tuple[float, float]:
        """(the shortest document length, the highest count of ``term``) of a non-empty index
        and a term it has, kept until the index changes (a search's bound reads them)."""
        stamp, least, most = self._extremes
        if stamp is not self._stamp:
            least, most = min(self._length.values()), {}
            self._extremes = (self._stamp, least, most)
        found = most.get(term)
        if found is None:
            found = most[term] = max(self._postings[term][1])
        return least, found

    def __len__(self) -> int:
        return len(self._length)

    def __contains__(self, key: object) -> bool:
        return key in self._length

    def keys(self) -> Iterable[K]:
        return self._length.keys()

    def nbytes(self) -> int:
        """Estimated bytes this index holds (for the cache that keeps it): the postings arrays
        and their pairs, the tables of ordinals, lengths and recencies and their floats. Term
        strings and document keys belong to the documents, so they are not counted here. The
        arrays' bytes are kept from the previous call, updated by the terms changed since."""
        if self._arrays_bytes is None:
            self._arrays_bytes = sum(sys.getsizeof(ords) + sys.getsizeof(tfs) for ords, tfs in self._postings.values())
        else:
            self._arrays_bytes += sum(self._term_bytes(term) - before for term, before in self._touched.items())
        self._touched.clear()
        arrays = self._arrays_bytes
        pairs = len(self._postings) * _PAIR_BYTES
        tables = (self._postings, self._keys, self._ordinal, self._length, self._lengths, self._recency)
        tables_bytes = sum(sys.getsizeof(t) for t in tables)
        return arrays + pairs + tables_bytes + len(self._keys) * (_INT_BYTES + 2 * _FLOAT_BYTES)

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


@dataclass(frozen=True)
class _Union(Generic[K]):
    """What BM25 needs of a union of indexes besides the postings: its document count, its
    mean length, and per index the keys an earlier index has (they count there only)."""

    n: int
    avg: float
    shadowed: tuple[frozenset[K], ...]


def _union(indexes: Sequence[BM25Index[K]]) -> _Union[K]:
    """The union's statistics, summed in key order as they always were (so every float is the
    same), kept with the last index that has documents while no index of the union changes. An
    empty index is told by its total length alone (all it adds), so a layer without documents
    read afresh at each search (a new empty index) does not lose what was kept."""
    stamps = tuple(index._stamp if index._length else index.total_length for index in indexes)
    last = next((index for index in reversed(indexes) if index._length), indexes[-1])
    if last._union is not None and last._union[0] == stamps:
        return last._union[1]
    n = len(indexes[0])
    total = indexes[0].total_length
    shadowed: list[frozenset[K]] = [frozenset()]
    for i, index in enumerate(indexes[1:], start=1):
        earlier = [other._length for other in indexes[:i] if other._length]
        owned = []
        for key, length in index._length.items():
            if earlier and any(key in other for other in earlier):
                owned.append(key)
            else:
                n += 1
                total += length
        shadowed.append(frozenset(owned))
    union = _Union(n, total / n if total > 0 and n > 0 else 1.0, tuple(shadowed))
    last._union = (stamps, union)
    return union


_Lists = list[tuple["BM25Index[K]", "array[int]", "array[float]", frozenset[K]]]


class QueryScorer(Generic[K]):
    """One query's BM25 over the union of ``indexes``: each distinct term's idf and postings,
    read once; every document's score (``scores``), one document's (``score``), or a bound no
    document's score exceeds (``bound``). A key in several indexes counts once, as the first
    index has it. Each score is the float the plain formula gives, summed over the terms in
    query order, whichever way it is asked for."""

    def __init__(self, query: Iterable[str], indexes: Sequence[BM25Index[K]], params: BM25Params) -> None:
        self._params = params
        self._terms: list[tuple[float, _Lists[K]]] = []
        self._names: list[str] = []  # the term of each of ``_terms``
        union = _union(indexes) if indexes else None
        if union is None or union.n == 0:
            return
        self._avg = union.avg
        for term in dict.fromkeys(query):
            lists: _Lists[K] = [
                (index, found[0], found[1], shadowed)
                for index, shadowed in zip(indexes, union.shadowed, strict=True)
                if (found := index._postings.get(term)) is not None
            ]
            df = sum(_count(index, ords, shadowed) for index, ords, _, shadowed in lists)
            if df > 0:
                self._terms.append((log(1.0 + (union.n - df + 0.5) / (df + 0.5)), lists))
                self._names.append(term)

    def scores(self) -> dict[K, float]:
        """Every document that has a query term, in the order the postings first name them."""
        avg, k1, b = self._avg if self._terms else 1.0, self._params.k1, self._params.b
        k1_1 = k1 + 1.0
        scores: dict[K, float] = {}
        get = scores.get
        for idf, lists in self._terms:
            for index, ords, tfs, shadowed in lists:
                keys, norms = index._keys, index.norms(k1, b, avg)
                if not shadowed:
                    for ordinal, tf in zip(ords, tfs, strict=True):
                        key = keys[ordinal]
                        scores[key] = get(key, 0.0) + idf * tf * k1_1 / (tf + norms[ordinal])
                    continue
                for ordinal, tf in zip(ords, tfs, strict=True):
                    key = keys[ordinal]
                    if key not in shadowed:
                        scores[key] = get(key, 0.0) + idf * tf * k1_1 / (tf + norms[ordinal])
        return scores

    def score(self, key: K) -> float | None:
        """``scores()[key]`` (None when absent), from the postings of ``key`` alone (bisection)."""
        k1, b = self._params.k1, self._params.b
        k1_1, rest = k1 + 1.0, 1.0 - b
        total: float | None = None
        for idf, lists in self._terms:
            for index, ords, tfs, shadowed in lists:
                ordinal = index._ordinal.get(key)
                if ordinal is None or (shadowed and key in shadowed):
                    continue
                at = bisect_left(ords, ordinal)
                if at < len(ords) and ords[at] == ordinal:
                    tf = tfs[at]
                    c = idf * tf * k1_1 / (tf + k1 * (rest + b * index._lengths[ordinal] / self._avg))
                    total = (0.0 if total is None else total) + c
                break  # the first index that has the key is the one it counts in
        return total

    def bound(self) -> float | None:
        """No document's score is above this (up to rounding): each term's idf at its highest
        count and the shortest length of the index; None when the parameters make no such
        bound (the term weight grows with the count and shrinks with the length only for
        ``k1`` ≥ 0 and ``b`` in [0, 1])."""
        k1, b = self._params.k1, self._params.b
        if k1 < 0 or not 0 <= b <= 1:
            return None
        total = 0.0
        for (idf, lists), term in zip(self._terms, self._names, strict=True):
            best = 0.0
            for index, _, _, _ in lists:
                least, tf = index.extremes(term)
                best = max(best, idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * least / self._avg)))
            total += best
        return total


def bm25_scores(
    query: Iterable[str], indexes: Sequence[BM25Index[K]], params: BM25Params = BM25Params()
) -> dict[K, float]:
    """The BM25 score of every document that contains a query term, over the union of
    ``indexes`` (``QueryScorer.scores``)."""
    return QueryScorer(query, indexes, params).scores()


def _count(index: BM25Index[K], ords: array[int], shadowed: frozenset[K]) -> int:
    """How many of the postings ``ords`` count in the union (not shadowed by an earlier index)."""
    if not shadowed:
        return len(ords)
    keys = index._keys
    return sum(1 for ordinal in ords if keys[ordinal] not in shadowed)


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
    return ranked(scores, recency, top_k)

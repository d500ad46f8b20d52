"""``BM25Index``'s postings after any sequence of adds, replaces and removes are what the plain
table of each live document's counts says: in the order documents were added, every count
exact (4-byte floats only where a count survives them), lengths summed as the counts are; its
byte estimate, kept from one ``nbytes`` to the next, is what walking it afresh gives; and its
scores, read through the length terms it keeps between changes (``norms``), are the plain
formula's floats over those documents at every point, and so is their bound."""

from __future__ import annotations

import copy
from math import log

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.memory.bm25 import BM25Index, BM25Params, QueryScorer, bm25_scores

COUNTS = st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 0.1, 1 / 3, 0.0])
TF = st.dictionaries(st.sampled_from("abcdefg"), COUNTS, max_size=6)
OPS = st.lists(
    st.tuples(st.sampled_from(["add", "replace", "remove", "measure", "score"]), st.integers(0, 7), TF), max_size=40
)


def walked(index: BM25Index[int]) -> int:
    """``nbytes`` of ``index`` as a first call computes it, walking every term."""
    fresh = copy.copy(index)
    fresh._arrays_bytes, fresh._touched = None, {}
    return fresh.nbytes()


QUERY = ["c", "a", "g", "a"]
PARAMS = [BM25Params(), BM25Params(k1=0.9, b=0.4)]


def plain_scores(index: BM25Index[int], live: dict[int, dict[str, float]], params: BM25Params) -> dict[int, float]:
    """The BM25 formula over the live documents (in the order added), each length term afresh."""
    n, avg = len(live), index.total_length / len(live) if index.total_length > 0 and live else 1.0
    scores: dict[int, float] = {}
    for term in dict.fromkeys(QUERY):
        having = [(key, tf[term]) for key, tf in live.items() if tf.get(term, 0.0) > 0]
        if not having:
            continue
        idf = log(1.0 + (n - len(having) + 0.5) / (len(having) + 0.5))
        for key, tf in having:
            norm = params.k1 * (1.0 - params.b + params.b * index.length(key) / avg)
            scores[key] = scores.get(key, 0.0) + idf * tf * (params.k1 + 1.0) / (tf + norm)
    return scores


def plain_bound(index: BM25Index[int], live: dict[int, dict[str, float]], params: BM25Params) -> float:
    """``QueryScorer.bound`` from the live documents: each term's idf at its highest count and
    the shortest length."""
    n, avg = len(live), index.total_length / len(live) if index.total_length > 0 and live else 1.0
    total = 0.0
    for term in dict.fromkeys(QUERY):
        counts = [tf[term] for tf in live.values() if tf.get(term, 0.0) > 0]
        if counts:
            idf = log(1.0 + (n - len(counts) + 0.5) / (len(counts) + 0.5))
            least, tf = min(index.length(key) for key in live), max(counts)
            k1, b = params.k1, params.b
            total += max(0.0, idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * least / avg)))
    return total


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_postings_are_the_plain_table_of_the_live_documents(ops: list[tuple[str, int, dict[str, float]]]) -> None:
    index: BM25Index[int] = BM25Index()
    live: dict[int, dict[str, float]] = {}  # in the order added
    for op, key, tf in ops:
        if op == "add" and key not in live:
            assert index.add(key, tf)
            live[key] = tf
        elif op == "replace" and key in live:
            index.replace(key, live[key], tf)
            live[key] = tf
        elif op == "remove" and key in live:
            index.remove(key, live.pop(key))
        elif op == "measure":
            assert index.nbytes() == walked(index)
        elif op == "score":
            params = PARAMS[key % 2]
            found = bm25_scores(QUERY, [index], params)
            assert list(found.items()) == list(plain_scores(index, live, params).items())
            assert QueryScorer(QUERY, [index], params).bound() == plain_bound(index, live, params)
    for term in "abcdefg":
        expected = [(key, tf[term]) for key, tf in live.items() if tf.get(term, 0.0) > 0]
        assert list(index.postings(term)) == expected
    for key, tf in live.items():
        length = 0.0
        for count in tf.values():
            if count > 0:
                length += count
        assert index.length(key) == length
    assert sorted(index.keys()) == sorted(live)
    assert index.nbytes() == walked(index)

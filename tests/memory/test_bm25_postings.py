"""``BM25Index``'s postings after any sequence of adds, replaces and removes are what the plain
table of each live document's counts says: in the order documents were added, every count
exact (4-byte floats only where a count survives them), lengths summed as the counts are; and
its byte estimate, kept from one ``nbytes`` to the next, is what walking it afresh gives."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.memory.bm25 import BM25Index

COUNTS = st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 0.1, 1 / 3, 0.0])
TF = st.dictionaries(st.sampled_from("abcdefg"), COUNTS, max_size=6)
OPS = st.lists(st.tuples(st.sampled_from(["add", "replace", "remove", "measure"]), st.integers(0, 7), TF), max_size=40)


def walked(index: BM25Index[int]) -> int:
    """``nbytes`` of ``index`` as a first call computes it, walking every term."""
    fresh = copy.copy(index)
    fresh._arrays_bytes, fresh._touched = None, {}
    return fresh.nbytes()


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

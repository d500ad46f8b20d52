"""BM25 scoring, ranking with the recency tie-break, several indexes, and reciprocal-rank fusion."""

from __future__ import annotations

from ctxproxy.memory.bm25 import BM25Index, BM25Params, bm25_scores, search, weighted_tf
from ctxproxy.memory.ranking import ranked, rrf


def tf(*words: str) -> dict[str, float]:
    return weighted_tf([(list(words), 1.0)])


def index_of(docs: dict[str, tuple[list[str], float]]) -> BM25Index[str]:
    index: BM25Index[str] = BM25Index()
    for key, (words, recency) in docs.items():
        index.add(key, tf(*words), recency)
    return index


def test_rarer_term_counts_more() -> None:
    index = index_of(
        {
            "common": (["postgres", "database"], 1.0),
            "rare": (["redis", "database"], 1.0),
            "other1": (["postgres", "schema"], 1.0),
            "other2": (["postgres", "index"], 1.0),
        }
    )
    hits = search(["postgres", "redis"], [index])
    assert hits[0][0] == "rare"


def test_shorter_document_wins_for_the_same_match() -> None:
    index = index_of({"long": (["gpu"] + ["filler"] * 20, 1.0), "short": (["gpu", "budget"], 1.0)})
    assert [key for key, _ in search(["gpu"], [index])] == ["short", "long"]


def test_b_zero_ignores_length() -> None:
    index = index_of({"long": (["gpu"] + ["filler"] * 20, 1.0), "short": (["gpu", "budget"], 1.0)})
    scores = bm25_scores(["gpu"], [index], BM25Params(k1=1.2, b=0.0))
    assert scores["long"] == scores["short"]


def test_repeated_term_saturates() -> None:
    index = index_of({"once": (["gpu", "x"], 1.0), "many": (["gpu"] * 10 + ["x"], 1.0), "none": (["y"], 1.0)})
    scores = bm25_scores(["gpu"], [index], BM25Params(k1=1.2, b=0.0))
    assert scores["many"] > scores["once"]
    assert scores["many"] < 2.2 * scores["once"] / 1.0  # bounded by (k1 + 1) times the idf


def test_equal_scores_newest_first() -> None:
    index = index_of(
        {"old": (["deploy", "friday"], 1.0), "new": (["deploy", "friday"], 5.0), "mid": (["deploy", "friday"], 3.0)}
    )
    assert [key for key, _ in search(["deploy"], [index])] == ["new", "mid", "old"]


def test_recency_only_breaks_ties() -> None:
    index = index_of(
        {"old_better": (["deploy", "deploy", "friday"], 1.0), "new_worse": (["deploy", "other", "words", "here"], 9.0)}
    )
    assert search(["deploy"], [index])[0][0] == "old_better"


def test_query_terms_count_once_and_unknown_terms_score_nothing() -> None:
    index = index_of({"a": (["gpu"], 1.0), "b": (["cpu"], 1.0)})
    assert bm25_scores(["gpu", "gpu", "gpu"], [index]) == bm25_scores(["gpu"], [index])
    assert bm25_scores(["tpu"], [index]) == {}
    assert bm25_scores(["gpu"], []) == {}


def test_union_of_indexes_counts_a_shared_key_once() -> None:
    first = index_of({"shared": (["gpu", "budget"], 1.0), "a": (["cpu"], 1.0)})
    second = index_of({"shared": (["gpu", "budget"], 1.0), "b": (["ram"], 1.0)})
    merged = index_of({"shared": (["gpu", "budget"], 1.0), "a": (["cpu"], 1.0), "b": (["ram"], 1.0)})
    assert bm25_scores(["gpu"], [first, second]) == bm25_scores(["gpu"], [merged])


def test_adding_a_known_key_is_ignored() -> None:
    index = index_of({"a": (["gpu"], 1.0)})
    assert index.add("a", tf("cpu"), 2.0) is False
    assert len(index) == 1 and "a" in dict(index.postings("gpu"))


def test_weighted_fields_multiply_counts() -> None:
    assert weighted_tf([(["gpu", "ram"], 1.0), (["gpu"], 0.5), (["ignored"], 0.0)]) == {"gpu": 1.5, "ram": 1.0}


def test_ranked_puts_missing_recency_last_among_equals() -> None:
    assert [k for k, _ in ranked({"x": 1.0, "y": 1.0}, {"y": 3.0})] == ["y", "x"]


def test_rrf_rewards_agreement() -> None:
    fused = rrf([["a", "b", "c"], ["b", "c", "a"], ["b", "a"]])
    assert [key for key, _ in fused][0] == "b"
    assert fused[0][1] == 1 / 62 + 1 / 61 + 1 / 61


def test_rrf_k_damps_a_single_first_place() -> None:
    # "solo" is first in one list only; "both" is second in two: agreement wins with k=60.
    fused = rrf([["solo", "both"], ["other", "both"]], k=60)
    assert fused[0][0] == "both"

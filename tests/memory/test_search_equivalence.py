"""The fast memory search (union statistics kept between searches, only what can reach the top
ordered) gives what the plain one gives (``search_reference``): the same documents, the same
float scores, ties in the same order — over random layers (shared documents, cards folded into
pages, dated pages), queries (naming a day or a month too), depths, kinds, vectors and weights,
and again after a layer is extended in place or an empty one read afresh."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxproxy.memory.docs as docs_module
from ctxproxy.memory.cards import MemoryCard
from ctxproxy.memory.docs import DEFAULT_SEARCH, Hit, LayerIndex, SearchParams, search_layers
from ctxproxy.memory.page_prune import with_wide
from ctxproxy.memory.scopes import LayerKind

from . import search_reference

WORDS = ["release", "billing", "snake", "Paris", "bike", "ledger", "port", "cluster", "garden", "tea"]
TIMES = ["on 8 May, 2023", "in May 2023", "last week", "yesterday", "in June"]
DAYS = ["2023-05-08", "2023-05-20", "2023-06-02", None]
PARAMS = [
    DEFAULT_SEARCH,
    SearchParams(card_share=0.5, tags_weight=0.3),
    SearchParams(wide_radius=2, neighbour_shares=(0.25, 0.0, 0.1)),
    SearchParams(wide_radius=0, context_weight=0.7),
    SearchParams(day_weight=-1.0, time_weight=-0.5),  # factors of 0 and 0.5: the order turned over
]
KINDS: list[LayerKind] = ["user", "scope", "session"]


@st.composite
def documents(draw: st.DrawFn, layer: int, shared: list[MemoryCard]) -> list[MemoryCard]:
    out = [doc for doc in shared if draw(st.booleans())]  # also in a broader layer
    for n in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["page", "page", "card"]))
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))
        if draw(st.integers(0, 4)) == 0:
            words.append(draw(st.sampled_from(TIMES)))
        page = n + draw(st.integers(0, 1)) if kind == "page" else draw(st.none() | st.integers(0, 12))
        tags = tuple(draw(st.lists(st.sampled_from(WORDS), max_size=2)))
        vector = draw(st.none() | st.tuples(st.sampled_from([0.0, 1.0, 0.5]), st.sampled_from([1.0, -1.0])))
        when = float(draw(st.integers(0, 2)) * 86400 + 1.68e9)  # equal times: ties fall to the order documents came in
        doc = MemoryCard(f"l{layer}-{n}", " ".join(words), "fact", tags, when, "src", page, kind, vector)
        out.append(MemoryCard(**{**doc.__dict__, "when": draw(st.sampled_from(DAYS))}))
    return out


def hits(found: list[Hit]) -> list[tuple[str, float, str]]:
    return [(h.doc.id, h.score, h.layer) for h in found]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(PARAMS))
def test_the_fast_search_gives_what_the_plain_one_gives(data: st.DataObject, params: SearchParams) -> None:
    layers: list[tuple[LayerKind, LayerIndex]] = []
    all_docs: list[list[MemoryCard]] = []
    for i, kind in enumerate(data.draw(st.sampled_from([KINDS[2:], KINDS[1:], KINDS]))):
        docs = data.draw(documents(i, [d for earlier in all_docs for d in earlier]))
        all_docs.append(docs)
        layers.append((kind, LayerIndex.build(docs, params)))
    for _ in range(data.draw(st.integers(1, 3))):
        layers = [(kind, index if index.docs else LayerIndex()) for kind, index in layers]  # an empty layer read afresh
        words = data.draw(st.lists(st.sampled_from(WORDS + TIMES + ["unknown"]), min_size=1, max_size=5))
        query = " ".join(words)
        top_k = data.draw(st.integers(1, 30))
        kinds = data.draw(st.sampled_from([None, ("page",), ("card",)]))
        vector = data.draw(st.none() | st.just((1.0, 0.5)))
        args = (query, layers, top_k)
        fast = search_layers(*args, kinds=kinds, query_vector=vector, params=params)
        plain = search_reference.search_layers(*args, kinds=kinds, query_vector=vector, params=params)
        assert hits(fast) == hits(plain)
        # A layer extended in place: what the previous search kept of the union no longer holds.
        at = data.draw(st.integers(0, len(layers) - 1))
        top = max((d.page or 0 for d in all_docs[at] if d.kind == "page"), default=0)
        more = [
            MemoryCard(f"x{at}-{len(all_docs[at])}-{n}", " ".join(words), "fact", (), 1.7e9, "src", top + n, "page")
            for n in range(data.draw(st.integers(0, 2)))
        ]
        layers[at][1].extend(more, params)
        all_docs[at] += more


def test_pages_that_cannot_reach_the_top_are_not_given_a_wide_score(monkeypatch: pytest.MonkeyPatch) -> None:
    words = [" ".join(WORDS[(n * 3 + i) % len(WORDS)] for i in range(4)) for n in range(80)]
    pages = [MemoryCard(f"p{n}", text, "fact", (), 1.7e9 + n, "src", n, "page") for n, text in enumerate(words)]
    pages[40] = MemoryCard("p40", "snake snake Paris ledger", "fact", (), 1.7e9, "src", 40, "page")
    layer = LayerIndex.build(pages, DEFAULT_SEARCH)
    kept: list[int] = []

    def counting(scores: dict[str, float], *args: Any) -> dict[str, float] | None:
        found = with_wide(scores, *args)
        kept.append(len(found) if found is not None else -1)
        return found

    monkeypatch.setattr(docs_module, "with_wide", counting)
    for query, top_k in [("snake Paris", 3), ("ledger snake", 1), ("tea garden port", 5)]:
        fast = search_layers(query, [("session", layer)], top_k)
        assert hits(fast) == hits(search_reference.search_layers(query, [("session", layer)], top_k))
    assert kept and all(0 < n < 40 for n in kept)  # pruned: most of the 80 pages left out

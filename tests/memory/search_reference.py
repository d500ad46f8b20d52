"""The memory search as written before it was made fast (5aa4451): every candidate scored,
every ranking sorted whole, each layer's owners tabled at every search. What
``test_search_equivalence`` holds the fast search to: the same hits, scores and order."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from math import log

from ctxproxy.memory.bm25 import BM25Index, BM25Params
from ctxproxy.memory.cards import DocKind, MemoryCard
from ctxproxy.memory.docs import DEFAULT_SEARCH, Hit, LayerIndex, SearchParams
from ctxproxy.memory.embeddings import cosine
from ctxproxy.memory.periods import overlaps, query_period
from ctxproxy.memory.ranking import rrf
from ctxproxy.memory.scopes import LayerKind
from ctxproxy.memory.text import terms

Owners = dict[str, tuple[LayerKind, LayerIndex]]


def bm25_scores(query: Iterable[str], indexes: Sequence[BM25Index[str]], params: BM25Params) -> dict[str, float]:
    def owned(key: str, before: int) -> bool:
        return any(key in indexes[j] for j in range(before))

    n, total = 0, 0.0
    for i, index in enumerate(indexes):
        if i == 0:
            n, total = len(index), index.total_length
            continue
        for key in index.keys():
            if not owned(key, i):
                n += 1
                total += index.length(key)
    if n == 0:
        return {}
    avg = total / n if total > 0 else 1.0
    scores: dict[str, float] = {}
    for term in dict.fromkeys(query):
        matches = [
            (key, tf, index)
            for i, index in enumerate(indexes)
            for key, tf in index.postings(term)
            if i == 0 or not owned(key, i)
        ]
        if not matches:
            continue
        df = len(matches)
        idf = log(1.0 + (n - df + 0.5) / (df + 0.5))
        for key, tf, index in matches:
            norm = params.k1 * (1.0 - params.b + params.b * index.length(key) / avg)
            scores[key] = scores.get(key, 0.0) + idf * tf * (params.k1 + 1.0) / (tf + norm)
    return scores


def ranked(scores: Mapping[str, float], recency: Mapping[str, float]) -> list[tuple[str, float]]:
    return sorted(scores.items(), key=lambda item: (-item[1], -recency.get(item[0], float("-inf"))))


def _page_scores(
    query: list[str], layers: Sequence[LayerIndex], params: SearchParams, owners: Owners
) -> dict[str, float]:
    own = bm25_scores(query, [index.pages for index in layers], params.page_bm25)
    context = bm25_scores(query, [index.contexts for index in layers], params.context_bm25)
    scores = {doc_id: own.get(doc_id, 0.0) + params.context_weight * score for doc_id, score in context.items()}
    for doc_id, score in own.items():
        scores.setdefault(doc_id, score)
        kind_index = owners[doc_id][1]
        doc = kind_index.docs[doc_id]
        if doc.page is None:
            continue
        for distance, share in enumerate(params.neighbour_shares, start=1):
            for other_page in (doc.page - distance, doc.page + distance):
                other = kind_index.numbers.get(other_page)
                if other is not None and share > 0:
                    scores[other] = scores.get(other, 0.0) + share * score
    if params.wide_radius > 0 and params.wide_weight > 0:
        for doc_id, score in bm25_scores(query, [index.wide for index in layers], params.wide_bm25).items():
            scores[doc_id] = scores.get(doc_id, 0.0) + params.wide_weight * score
    return {doc_id: score for doc_id, score in scores.items() if score > 0}


def search_layers(
    query: str,
    layers: Sequence[tuple[LayerKind, LayerIndex]],
    top_k: int,
    *,
    kinds: Collection[DocKind] | None = None,
    query_vector: Sequence[float] | None = None,
    params: SearchParams = DEFAULT_SEARCH,
) -> list[Hit]:
    if top_k <= 0 or not layers:
        return []
    owners: Owners = {}
    page_ids: dict[tuple[str, int], str] = {}
    for kind, layer in layers:
        for doc_id in layer.docs:
            owners.setdefault(doc_id, (kind, layer))
        for where, doc_id in layer.page_ids.items():
            page_ids.setdefault(where, doc_id)

    def doc(doc_id: str) -> MemoryCard:
        return owners[doc_id][1].docs[doc_id]

    def recency(scores: Mapping[str, float]) -> dict[str, float]:
        return {doc_id: doc(doc_id).created_at for doc_id in scores}

    want_pages = kinds is None or "page" in kinds
    want_cards = kinds is None or "card" in kinds
    indexes = [index for _, index in layers]
    query_terms = terms(query)
    pages = _page_scores(query_terms, indexes, params, owners) if want_pages else {}
    cards: dict[str, float] = {}
    if want_cards:
        for doc_id, score in bm25_scores(query_terms, [index.cards for index in indexes], params.card_bm25).items():
            card = doc(doc_id)
            page = page_ids.get((card.source, card.page)) if want_pages and card.page is not None else None
            if page is None:
                cards[doc_id] = score
            elif params.card_share > 0:
                pages[page] = pages.get(page, 0.0) + params.card_share * score
    latest = max((index.latest for index in indexes if index.latest is not None), default=None)
    period = query_period(query, latest) if latest is not None and params.time_weight > 0 else None
    if period is not None:
        weight = params.day_weight if period[0] == period[1] else params.time_weight
        for table in (pages, cards):
            for doc_id in table:
                if any(overlaps(spoken, period) for spoken in owners[doc_id][1].periods.get(doc_id, ())):
                    table[doc_id] *= 1 + weight
    rankings = [ranked(scores, recency(scores)) for scores in (pages, cards) if scores]
    if query_vector:
        similarity: dict[str, float] = {}
        for doc_id in owners:
            d = doc(doc_id)
            if d.vector is not None and len(d.vector) == len(query_vector) and (kinds is None or d.kind in kinds):
                similarity[doc_id] = cosine(query_vector, d.vector)
        by_vector = ranked(similarity, recency(similarity))[: params.vector_candidates]
        if by_vector:
            rankings.append(by_vector)
    if not rankings:
        return []
    order = rankings[0] if len(rankings) == 1 else rrf([[d for d, _ in r] for r in rankings], k=params.rrf_k)
    return [Hit(doc(doc_id), score, owners[doc_id][0]) for doc_id, score in order[:top_k]]

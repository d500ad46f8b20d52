"""Searching memory documents: a layer's index and the ranking over several layers. Pure.

``LayerIndex`` tokenises one layer's documents once (``memories.py`` caches it per layer
revision; a revision that appends documents extends the cached index in place, and any other
new revision reuses the term counts of the documents it already had, so archiving one more
page costs that page and the windows around it, not the layer). It keeps four BM25 indexes:

- **cards**, with their tags as a second, lighter field (tags repeat salient words and carry
  the speaker);
- **pages**, the archived pages' own text;
- **page contexts**: each page's text together with the pages just before and after it
  (by page number, within the layer: archived pages live only in their session's layer, so
  a layer's pages are one conversation, whatever ``source`` each page carries);
- **wide contexts** (when ``wide_radius`` > 0): each page's text together with the
  ``wide_radius`` pages on either side, as one document with its own BM25 statistics.

``search_layers`` ranks the documents of all read layers together (each document once, in the
broadest layer that has it):

1. Pages: ``own + context_weight * context + sum over d of neighbour_shares[d-1] * (own(p-d) +
   own(p+d))``, each term a BM25 score over the union of the layers. The context and neighbour terms exist
   because a question's answer is often on the page *next to* the one that names its subject
   ("Do you have a pet?" / "I bought her in Paris."): the context index rewards a page whose
   surroundings match several query words, the neighbour share lets a weak match beside a
   strong one beat an isolated weak match (a page two away still gets a smaller share), and a
   page's own text still counts most.
   ``wide_weight`` times the wide-context score is added on top: a conversation stays on one
   topic for a while (whole LoCoMo sessions as units reach recall@5 0.878 against 0.666 for
   turn pairs), so a page in a stretch that matches the query as a whole is likelier to be the
   one, even when the words are spread over pages further away than its neighbours. The weight
   is small because the window is coarse: it sorts pages between regions, not within one.
   Summing a wider window into the ±1 context instead, or fusing the wide ranking by rank,
   lost recall@5 on LoCoMo; a separate index with its own length normalisation gained it.
   Cards and pages get separate BM25 statistics: a card is one sentence, a page a dialogue, and
   shared length normalisation would favour whichever kind is shorter.
2. Cards: BM25 over the cards. A card extracted from a page that is among the documents (same
   ``source`` and ``page``, in any read layer: a user-layer card still belongs to its session's
   page) is folded into that page — it adds ``card_share`` of its score to the page instead of
   being listed, because the page already says it. Other cards (from summaries, from other
   sessions) stand alone. The share defaults to 0: on LoCoMo a lift helped recall@1 and cost
   recall@5.
3. The page ranking and the card ranking are fused by reciprocal rank (``ranking.rrf``), which
   needs no common scale between two different kinds of score. With a query vector, the
   documents that have vectors are also ranked by cosine similarity and fused the same way.
   With a single ranking its BM25 order and scores stand.

Ties are broken by recency (``created_at``, newest first). The defaults were tuned on LoCoMo
conversations 0-4 and checked on 5-9 (``bench/recall.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date

from ctxproxy.memory.bm25 import BM25Index, BM25Params, QueryScorer, bm25_scores, weighted_tf
from ctxproxy.memory.cards import DocKind, MemoryCard
from ctxproxy.memory.embeddings import cosine
from ctxproxy.memory.owners import Owners
from ctxproxy.memory.page_prune import with_wide
from ctxproxy.memory.periods import Period, doc_day, overlaps, query_period, spoken_periods
from ctxproxy.memory.ranking import ranked, rrf
from ctxproxy.memory.scopes import LayerKind
from ctxproxy.memory.term_counts import TermCounts
from ctxproxy.memory.text import terms
from ctxproxy.memory.windows import around, page_windows, windows_at
from ctxproxy.session.lineage import Lineage

__all__ = ["DEFAULT_SEARCH", "Hit", "LayerIndex", "SearchParams", "doc_terms", "search_layers"]


@dataclass(frozen=True)
class SearchParams:
    page_bm25: BM25Params = BM25Params(k1=0.9, b=0.4)
    context_bm25: BM25Params = BM25Params(k1=1.2, b=0.75)
    card_bm25: BM25Params = BM25Params(k1=1.2, b=0.75)
    context_weight: float = 1.0
    neighbour_shares: tuple[float, ...] = (0.25, 0.1)  # share of own(p±d) given to page p, for d = 1, 2, ...
    wide_radius: int = 12  # pages on either side in a page's wide context; 0 switches it off
    wide_weight: float = 0.3
    wide_bm25: BM25Params = BM25Params(k1=1.2, b=0.75)
    card_share: float = 0.0
    tags_weight: float = 0.5
    rrf_k: int = 60
    vector_candidates: int = 100  # how deep the cosine ranking goes into the fusion
    time_weight: float = 1.0  # a question naming a time: a document of then scores 1 + this times as much
    day_weight: float = 4.0  # the same when the time named is one day ("on 1 May, 2022"): then is narrower


DEFAULT_SEARCH = SearchParams()


@dataclass(frozen=True)
class Hit:
    doc: MemoryCard
    score: float
    layer: LayerKind


def doc_terms(doc: MemoryCard, params: SearchParams) -> dict[str, float]:
    """The weighted term frequencies a document is indexed with (its own text, no context)."""
    fields = [(terms(doc.content), 1.0)]
    if doc.tags:
        fields.append((terms(" ".join(doc.tags)), params.tags_weight))
    return weighted_tf(fields)


@dataclass
class LayerIndex:
    """One layer's documents, tokenised: built once per layer, then extended in place as pages
    are appended (``extend``) and otherwise only read."""

    docs: dict[str, MemoryCard] = field(default_factory=dict)
    tf: dict[str, TermCounts] = field(default_factory=dict)
    cards: BM25Index[str] = field(default_factory=BM25Index)
    pages: BM25Index[str] = field(default_factory=BM25Index)
    contexts: BM25Index[str] = field(default_factory=BM25Index)
    wide: BM25Index[str] = field(default_factory=BM25Index)
    page_ids: dict[tuple[str, int], str] = field(default_factory=dict)  # (source, page) -> page doc id
    numbers: dict[int, str] = field(default_factory=dict)  # page number -> page doc id
    by_lineage: dict[Lineage, list[str]] = field(default_factory=dict)  # lineage -> the doc ids bound to it
    # A document's estimated size with its term counts', once known (index_size).
    doc_bytes: dict[str, int] = field(default_factory=dict)
    periods: dict[str, tuple[Period, ...]] = field(default_factory=dict)  # the times a document speaks of
    latest: date | None = None  # the newest exchange date of its documents
    vocabulary: dict[str, str] = field(default_factory=dict)  # each term string once (shared with the next revision)

    @classmethod
    def build(cls, docs: Iterable[MemoryCard], params: SearchParams, previous: LayerIndex | None = None) -> LayerIndex:
        """Index ``docs``; term counts of documents ``previous`` has are reused, not recomputed."""
        index = cls(vocabulary=previous.vocabulary if previous is not None else {})
        index._take(docs, params, previous)
        for page, doc_id in index.numbers.items():
            index.contexts.add(doc_id, around(page, index.numbers, index.tf, 1), index.docs[doc_id].created_at)
        if params.wide_radius > 0:
            for doc_id, tf in page_windows(index.numbers, index.tf, params.wide_radius):
                index.wide.add(doc_id, tf, index.docs[doc_id].created_at)
        return index

    def extend(self, docs: Sequence[MemoryCard], params: SearchParams) -> bool:
        """Add ``docs`` in place, indexed exactly as ``build`` over the documents this index has
        followed by ``docs`` would index them: the new pages, and the contexts and wide contexts
        of the pages before them that now reach them. False, and nothing changed, when a new
        page is numbered before a page this index has (``build`` would order it elsewhere)."""
        if not self.appendable(docs):
            return False
        fresh = [d.page for d in docs if d.kind == "page" and d.page is not None and d.page not in self.numbers]
        lowest = min(fresh, default=None)
        radii = (
            [(self.contexts, 1), (self.wide, params.wide_radius)] if params.wide_radius > 0 else [(self.contexts, 1)]
        )
        before = [
            self._windows(sorted(page for page in self.numbers if page >= lowest - r), r) if lowest is not None else {}
            for _, r in radii
        ]
        added = self._take(docs, params, None)
        for (bm25, radius), old in zip(radii, before, strict=True):
            after = self._windows(sorted([*old, *(page for page, _ in added)]), radius)
            for page, tf in old.items():
                bm25.replace(self.numbers[page], tf, after[page])
            for page, doc_id in sorted(added) if bm25 is self.wide else added:
                bm25.add(doc_id, after[page], self.docs[doc_id].created_at)
        return True

    def _windows(self, pages: Sequence[int], radius: int) -> dict[int, dict[str, float]]:
        """``around`` each of ``pages`` (ascending), summed as a running window (``windows_at``)."""
        return dict(windows_at(pages, self.numbers, self.tf, radius))

    def appendable(self, docs: Iterable[MemoryCard], without: Collection[str] = ()) -> bool:
        """Whether ``extend`` takes ``docs`` once the documents ``without`` are dropped."""
        top = max((page for page, doc_id in self.numbers.items() if doc_id not in without), default=None)
        return top is None or all(d.page >= top for d in docs if d.kind == "page" and d.page is not None)

    def droppable(self, ids: Collection[str]) -> bool:
        """Whether ``drop`` can take out ``ids``: no page kept has the page number of one dropped."""
        gone = {self.docs[i].page for i in ids if self.docs[i].kind == "page"} - {None}
        return not any(d.kind == "page" and d.page in gone for i, d in self.docs.items() if i not in ids)

    def drop(self, ids: Collection[str], params: SearchParams) -> None:
        """Take the documents ``ids`` out in place, leaving what ``build`` over the others would
        give: the pages around a dropped one get their contexts and windows again (``droppable``
        first)."""
        gone = {page: i for page, i in self.numbers.items() if i in ids}
        radii = [(self.contexts, 1)] + ([(self.wide, params.wide_radius)] if params.wide_radius > 0 else [])
        before = []
        for _, r in radii:
            near = {p for q in gone for p in range(q - r, q + r + 1) if p in self.numbers}
            before.append(self._windows(sorted(near), r))
        for page in gone:
            del self.numbers[page]
        for (bm25, radius), old in zip(radii, before, strict=True):
            after = self._windows([page for page in old if page not in gone], radius)
            for page, tf in old.items():
                if page in gone:
                    bm25.remove(gone[page], tf)
                else:
                    bm25.replace(self.numbers[page], tf, after[page])
        for doc_id in ids:
            doc, counts = self.docs.pop(doc_id), self.tf.pop(doc_id)
            for bm25 in (self.pages, self.cards):
                if doc_id in bm25:
                    bm25.remove(doc_id, counts)
            if doc.page is not None and self.page_ids.get((doc.source, doc.page)) == doc_id:
                del self.page_ids[(doc.source, doc.page)]
            for lineage in doc.lineage:
                self.by_lineage[lineage].remove(doc_id)
                if not self.by_lineage[lineage]:
                    del self.by_lineage[lineage]
            self.doc_bytes.pop(doc_id, None)
            self.periods.pop(doc_id, None)
        self.latest = max((known[0][0] for known in self.periods.values()), default=None)

    def _take(
        self, docs: Iterable[MemoryCard], params: SearchParams, previous: LayerIndex | None
    ) -> list[tuple[int, str]]:
        """Add the documents (their term counts, own postings, pages and times); returns the
        (page number, doc id) entries they added to ``numbers``, in order."""
        added: list[tuple[int, str]] = []
        for doc in docs:
            if doc.id in self.docs:
                continue
            self.docs[doc.id] = doc
            for lineage in doc.lineage:
                self.by_lineage.setdefault(lineage, []).append(doc.id)
            if previous is not None and doc.id in previous.doc_bytes:
                self.doc_bytes[doc.id] = previous.doc_bytes[doc.id]
            known = previous.tf.get(doc.id) if previous is not None else None
            tf = self.tf[doc.id] = known if known is not None else TermCounts(doc_terms(doc, params), self.vocabulary)
            self.add_periods(doc, previous)
            if doc.kind == "page" and doc.page is not None:
                self.pages.add(doc.id, tf, doc.created_at)
                self.page_ids.setdefault((doc.source, doc.page), doc.id)
                if doc.page not in self.numbers:
                    self.numbers[doc.page] = doc.id
                    added.append((doc.page, doc.id))
            elif doc.kind == "card":
                self.cards.add(doc.id, tf, doc.created_at)
        return added

    def add_periods(self, doc: MemoryCard, previous: LayerIndex | None) -> None:
        """The times ``doc`` speaks of (``periods.spoken_periods``), reused from ``previous``."""
        known = previous.periods.get(doc.id) if previous is not None else None
        if known is None:
            day = doc_day(doc)
            known = tuple(spoken_periods(doc.content, day)) if day is not None else ()
        if known:
            self.periods[doc.id] = known
            self.latest = max(self.latest or known[0][0], known[0][0])


Prune = tuple[int, Callable[[str], float], float]  # top_k, the time factor of a page, its highest


def _page_scores(
    query: list[str], layers: Sequence[LayerIndex], params: SearchParams, owners: Owners, prune: Prune | None
) -> dict[str, float]:
    """Every page's score; with ``prune``, only of the pages that can reach the ``top_k`` best
    once scaled by their time factor (``page_prune``)."""
    own = bm25_scores(query, [index.pages for index in layers], params.page_bm25)
    context = bm25_scores(query, [index.contexts for index in layers], params.context_bm25)
    scores = {doc_id: own.get(doc_id, 0.0) + params.context_weight * score for doc_id, score in context.items()}
    _add_neighbours(scores, own, params, owners)
    if params.wide_radius > 0 and params.wide_weight > 0:
        wide = QueryScorer(query, [index.wide for index in layers], params.wide_bm25)
        kept = with_wide(scores, wide, params.wide_weight, *prune) if prune is not None else None
        if kept is not None:
            return kept
        for doc_id, score in wide.scores().items():
            scores[doc_id] = scores.get(doc_id, 0.0) + params.wide_weight * score
    return {doc_id: score for doc_id, score in scores.items() if score > 0}


def _add_neighbours(scores: dict[str, float], own: dict[str, float], params: SearchParams, owners: Owners) -> None:
    """Each page's ``neighbour_shares`` of its neighbours' own scores, added to ``scores`` in
    place, in the order ``own`` names the pages (so every sum is the same float)."""
    shares = [(distance, share) for distance, share in enumerate(params.neighbour_shares, start=1) if share > 0]
    get, setdefault, only = scores.get, scores.setdefault, owners.only
    for doc_id, score in own.items():
        setdefault(doc_id, score)
        index = only or owners[doc_id][1]
        page = index.docs[doc_id].page
        if page is None:
            continue
        at = index.numbers.get
        for distance, share in shares:
            other = at(page - distance)
            if other is not None:
                scores[other] = get(other, 0.0) + share * score
            other = at(page + distance)
            if other is not None:
                scores[other] = get(other, 0.0) + share * score


def _card_scores(
    query: list[str], indexes: Sequence[LayerIndex], params: SearchParams, owners: Owners, pages: dict[str, float]
) -> dict[str, float]:
    """The cards' scores, but for the cards folded into one of ``pages``' documents (their
    ``card_share`` added to it in place)."""
    cards: dict[str, float] = {}
    doc, page_of = owners.only.docs.__getitem__ if owners.only is not None else owners.doc, owners.page_of
    for doc_id, score in bm25_scores(query, [index.cards for index in indexes], params.card_bm25).items():
        page = page_of(doc(doc_id))
        if page is None:
            cards[doc_id] = score
        elif params.card_share > 0:
            pages[page] = pages.get(page, 0.0) + params.card_share * score
    return cards


def _vector_ranking(
    query_vector: Sequence[float], owners: Owners, kinds: Collection[DocKind] | None, params: SearchParams
) -> list[tuple[str, float]]:
    similarity: dict[str, float] = {}
    for doc_id in owners:
        doc = owners.doc(doc_id)
        if doc.vector is not None and len(doc.vector) == len(query_vector) and (kinds is None or doc.kind in kinds):
            similarity[doc_id] = cosine(query_vector, doc.vector)
    return ranked(similarity, owners.created_at, params.vector_candidates)


def _time_factor(
    query: str, indexes: Sequence[LayerIndex], params: SearchParams, owners: Owners
) -> tuple[Callable[[str], float], float]:
    """A question that names a time (``periods.query_period``, against the newest exchange date
    of the layers) scales up the documents that speak of then: by ``1 + day_weight`` when it
    names one day, else by ``1 + time_weight``. A day holds a session or two, a month many: a
    page of the named day is a likelier answer than a page of the named month, so it may rise
    further (on LoCoMo 0-4, day weights 1, 2, 4 and 10 were tried; 4 gained most). Returns
    each document's factor (1.0: not scaled) and the highest (at least 1)."""
    latest = max((index.latest for index in indexes if index.latest is not None), default=None)
    period = query_period(query, latest) if latest is not None and params.time_weight > 0 else None
    if period is None:
        return _unscaled, 1.0
    then = period
    boost = 1 + (params.day_weight if then[0] == then[1] else params.time_weight)

    def factor(doc_id: str) -> float:
        return boost if any(overlaps(spoken, then) for spoken in owners[doc_id][1].periods.get(doc_id, ())) else 1.0

    # A factor of 0 or less would turn the order over: no bound holds then (``page_prune``).
    return factor, max(boost, 1.0) if boost > 0 else float("inf")


def _unscaled(_: str) -> float:
    return 1.0


def _prefer_then(factor: Callable[[str], float], scores: Iterable[dict[str, float]]) -> None:
    """The documents' scores scaled by their time factor, in place."""
    if factor is _unscaled:
        return
    for table in scores:
        for doc_id in table:
            scaled = factor(doc_id)
            if scaled != 1.0:
                table[doc_id] *= scaled


def search_layers(
    query: str,
    layers: Sequence[tuple[LayerKind, LayerIndex]],
    top_k: int,
    *,
    kinds: Collection[DocKind] | None = None,
    query_vector: Sequence[float] | None = None,
    params: SearchParams = DEFAULT_SEARCH,
) -> list[Hit]:
    """The ``top_k`` best documents of ``layers`` (broadest first) for ``query``; see the module docstring."""
    if top_k <= 0 or not layers:
        return []
    want_pages = kinds is None or "page" in kinds
    want_cards = kinds is None or "card" in kinds
    owners = Owners(layers)
    indexes = [index for _, index in layers]
    query_terms = terms(query)
    factor, top_factor = _time_factor(query, indexes, params, owners)
    # Only the top_k pages need their full score unless pages are fused beyond top_k (a vector
    # ranking) or lifted after (card shares).
    exact = bool(query_vector) or (want_cards and params.card_share > 0)
    prune = None if exact else (top_k, factor, top_factor)
    pages = _page_scores(query_terms, indexes, params, owners, prune) if want_pages else {}
    cards: dict[str, float] = {}
    if want_cards and want_pages:
        cards = _card_scores(query_terms, indexes, params, owners, pages)
    elif want_cards:
        cards = bm25_scores(query_terms, [index.cards for index in indexes], params.card_bm25)
    _prefer_then(factor, (pages, cards))
    # Without a vector ranking pages and cards are disjoint, and the fused top_k takes ranks
    # up to top_k of each (rank r of either gives the same score, pages first): the rest need no order.
    depth = None if query_vector else top_k
    rankings = [ranked(scores, owners.created_at, depth) for scores in (pages, cards) if scores]
    if query_vector:
        by_vector = _vector_ranking(query_vector, owners, kinds, params)
        if by_vector:
            rankings.append(by_vector)
    if not rankings:
        return []
    order = rankings[0] if len(rankings) == 1 else rrf([[d for d, _ in r] for r in rankings], k=params.rrf_k)
    return [Hit(owners.doc(doc_id), score, owners[doc_id][0]) for doc_id, score in order[:top_k]]

"""What a cached ``LayerIndex`` costs in memory, estimated in time linear in its documents and
terms (not in its objects): the memory search cache is bounded by these bytes."""

from __future__ import annotations

import sys

from ctxproxy.cache import json_size
from ctxproxy.memory.docs import LayerIndex


def layer_index_bytes(index: LayerIndex) -> int:
    """The estimate; each document's share (itself and its term counts) is kept in
    ``index.doc_bytes`` (and carried into the layer's next revision, which reuses the counts),
    so a layer that changes every round costs its new documents, and the postings' share is
    kept by each BM25 index as it changes (``BM25Index.nbytes``)."""
    sizes, tfs = index.doc_bytes, index.tf
    docs = sum(
        sizes[doc_id] if doc_id in sizes else sizes.setdefault(doc_id, json_size(doc.to_json()) + tfs[doc_id].nbytes())
        for doc_id, doc in index.docs.items()
    )
    strings = sys.getsizeof(index.vocabulary) + sum(sys.getsizeof(term) for term in index.vocabulary)
    postings = sum(bm25.nbytes() for bm25 in (index.cards, index.pages, index.contexts, index.wide))
    tables = sum(
        sys.getsizeof(table) for table in (index.docs, index.tf, index.page_ids, index.numbers, index.doc_bytes)
    )
    pages = (len(index.page_ids) + len(index.numbers)) * json_size(("source", 1))
    lineages = sys.getsizeof(index.by_lineage) + sum(
        sys.getsizeof(ids) + sys.getsizeof(lineage) + sys.getsizeof(lineage.prefix)
        for lineage, ids in index.by_lineage.items()
    )
    return docs + strings + postings + tables + pages + lineages

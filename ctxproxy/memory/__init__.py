"""Long-term memory (notes 001 and 002): memory cards and archived pages, stored per tenant in
user / scope / session layers, and searched with BM25 (plus optional embeddings).

Pure modules: ``text`` (search terms, CJK n-grams), ``bm25`` (scoring, ranking, fusion),
``cards`` (documents and their extractors), ``round_cards`` (what one finished round says of the
user and of the project, note 002), ``scopes`` (layers and the write rule), ``docs`` (indexing
and ranking over layers), ``inject`` (what is injected where). I/O: ``memories``
(``MemoryStore``, the Store), ``embeddings`` (the upstream's ``/v1/embeddings``), ``writer``
(embedded, then stored), ``after_round`` (each round's memories, in the background); ``pins``
keeps a session's layered blocks between two compressions (in process).
"""

from ctxproxy.memory.cards import CARD_TYPES, MemoryCard, card_id, cards_from_messages, cards_from_summary, page_doc
from ctxproxy.memory.docs import Hit, SearchParams
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import Layer, MemoryScope

__all__ = [
    "CARD_TYPES",
    "Hit",
    "Layer",
    "MemoryCard",
    "MemoryScope",
    "MemoryStore",
    "SearchParams",
    "card_id",
    "cards_from_messages",
    "cards_from_summary",
    "page_doc",
]

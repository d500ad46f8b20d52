"""Which read layer a memory document counts in during a search: the first (broadest) that
has it, looked up per document asked about (a search reads a few hundred of a layer's thousands
of documents; tabling every owner at each search cost more than the scoring). Pure."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ctxproxy.memory.cards import MemoryCard
from ctxproxy.memory.scopes import LayerKind

if TYPE_CHECKING:
    from ctxproxy.memory.docs import LayerIndex

__all__ = ["Owners"]


class Owners:
    """Each document's first (broadest) layer among the read ones, looked up when asked (a
    search reads a few hundred of a layer's thousands of documents), and archived pages by
    (source, page number), likewise."""

    def __init__(self, layers: Sequence[tuple[LayerKind, LayerIndex]]) -> None:
        self._layers = [(kind, index) for kind, index in layers if index.docs]
        self.only = self._layers[0][1] if len(self._layers) == 1 else None  # the one layer with documents

    def __getitem__(self, doc_id: str) -> tuple[LayerKind, LayerIndex]:
        for layer in self._layers:
            if doc_id in layer[1].docs:
                return layer
        raise KeyError(doc_id)

    def doc(self, doc_id: str) -> MemoryCard:
        return (self.only or self[doc_id][1]).docs[doc_id]

    def created_at(self, doc_id: str) -> float:
        return self.doc(doc_id).created_at

    def page_of(self, card: MemoryCard) -> str | None:
        """The page document ``card`` was extracted from, in the broadest layer that has it; None
        for a card of no page."""
        if card.page is None:
            return None
        key = (card.source, card.page)
        if self.only is not None:
            return self.only.page_ids.get(key)
        for _, index in self._layers:
            found = index.page_ids.get(key)
            if found is not None:
                return found
        return None

    def __iter__(self) -> Iterator[str]:
        """Every document id once, broadest layer first."""
        if len(self._layers) == 1:
            return iter(self._layers[0][1].docs)
        return iter(dict.fromkeys(doc_id for _, index in self._layers for doc_id in index.docs))

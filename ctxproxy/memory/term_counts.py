"""A document's term counts, compact: the terms as a tuple (each string shared through its
layer's vocabulary) and their counts as an array of floats, about 12 bytes a term where a dict
spends ~100 (its entry, a float object and the document's own copy of the term string). Pure."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator, Mapping

__all__ = ["TermCounts"]


class TermCounts(Mapping[str, float]):
    """Read-only ``{term: count}`` in the order the counts were given."""

    __slots__ = ("_counts", "_terms")

    def __init__(self, tf: Mapping[str, float], vocabulary: dict[str, str]) -> None:
        """``vocabulary``: the layer's term strings, each kept once (new ones are added)."""
        self._terms = tuple(vocabulary.setdefault(term, term) for term in tf)
        counts = array("f", tf.values())
        # 4-byte floats when each count survives them exactly (weights such as 1 and 0.5 do).
        self._counts = counts if counts.tolist() == list(tf.values()) else array("d", tf.values())

    def __getitem__(self, term: str) -> float:
        try:
            return self._counts[self._terms.index(term)]
        except ValueError:
            raise KeyError(term) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._terms)

    def __len__(self) -> int:
        return len(self._terms)

    def items(self) -> Iterator[tuple[str, float]]:  # type: ignore[override]
        return zip(self._terms, self._counts, strict=True)

    def nbytes(self) -> int:
        """This object, its tuple and its array (the strings are the vocabulary's)."""
        return sys.getsizeof(self) + sys.getsizeof(self._terms) + sys.getsizeof(self._counts)

"""Term counts of a page together with the pages around it (by page number): the documents of
a layer's context and wide-context indexes (``docs.LayerIndex``). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["around", "page_windows", "summed"]


def summed(counts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """The term counts of several documents added up."""
    total: dict[str, float] = {}
    for tf in counts:
        for term, count in tf.items():
            total[term] = total.get(term, 0.0) + count
    return total


def around(
    page: int, numbers: Mapping[int, str], tf: Mapping[str, Mapping[str, float]], radius: int
) -> dict[str, float]:
    """The summed counts of the pages within ``radius`` page numbers of ``page`` (a fresh sum: for
    the few windows an appended page changes)."""
    pages = (numbers.get(other) for other in range(page - radius, page + radius + 1))
    return summed(tf[doc_id] for doc_id in pages if doc_id is not None)


def page_windows(
    numbers: Mapping[int, str], tf: Mapping[str, Mapping[str, float]], radius: int
) -> Iterable[tuple[str, dict[str, float]]]:
    """Each page's document id with the summed term counts of the pages within ``radius`` page
    numbers of it, as a running sum: every page's counts are added once and taken away once, so
    a layer's wide contexts cost its pages, not its pages times the window. Equal to ``around``
    for each page (exactly, while counts are sums of weights such as 1 and 0.5, as the default
    ones are; other weights may differ in the last bits)."""
    pages = sorted(numbers)
    window: dict[str, float] = {}
    start = end = 0
    for page in pages:
        while end < len(pages) and pages[end] <= page + radius:
            for term, count in tf[numbers[pages[end]]].items():
                window[term] = window.get(term, 0.0) + count
            end += 1
        while pages[start] < page - radius:
            for term, count in tf[numbers[pages[start]]].items():
                left = window[term] - count
                if left > 1e-9:
                    window[term] = left
                else:
                    del window[term]
            start += 1
        yield numbers[page], dict(window)

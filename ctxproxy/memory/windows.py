"""Term counts of a page together with the pages around it (by page number): the documents of
a layer's context and wide-context indexes (``docs.LayerIndex``). Pure."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence

__all__ = ["around", "page_windows", "summed", "windows_at"]


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
    numbers of it (``windows_at`` every page): a layer's wide contexts cost its pages, not its
    pages times the window."""
    return ((numbers[page], window) for page, window in windows_at(sorted(numbers), numbers, tf, radius))


def windows_at(
    wanted: Sequence[int], numbers: Mapping[int, str], tf: Mapping[str, Mapping[str, float]], radius: int
) -> Iterator[tuple[int, dict[str, float]]]:
    """``around`` each of the ``wanted`` page numbers (ascending), as a running sum: the counts of
    every page within reach are added once and taken away once, so the windows of a run of
    pages cost the run and its reach, not the run times the window (the few pages an archival
    changes in a layer of thousands). Equal to ``around`` for each page (exactly, while counts
    are sums of weights such as 1 and 0.5, as the default ones are; other weights may differ
    in the last bits)."""
    pages = sorted(numbers)
    window: dict[str, float] = {}
    start = end = 0  # the window holds pages[start:end]
    for page in wanted:
        low = bisect_left(pages, page - radius)
        if low >= end:  # nothing in common with the window so far: start afresh
            window, start, end = {}, low, low
        while end < len(pages) and pages[end] <= page + radius:
            for term, count in tf[numbers[pages[end]]].items():
                window[term] = window.get(term, 0.0) + count
            end += 1
        while start < low:
            for term, count in tf[numbers[pages[start]]].items():
                left = window[term] - count
                if left > 1e-9:
                    window[term] = left
                else:
                    del window[term]
            start += 1
        yield page, dict(window)

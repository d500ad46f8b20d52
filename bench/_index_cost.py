"""What time-aware memory costs (bench/recall.py --index-cost): a layer's index built with and
without its documents' periods, and a search with and without the time preference, side by side
in one process (best of several runs each, so that another process's burst counts least)."""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ctxproxy.memory.cards import MemoryCard, cards_from_messages, page_doc
from ctxproxy.memory.docs import DEFAULT_SEARCH, LayerIndex, SearchParams, search_layers
from ctxproxy.strategies.dates import exchange_dates


def _best(run: Callable[[], float], times: int) -> float:
    return min(run() for _ in range(times))


def _timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _docs(conv: Any) -> list[MemoryCard]:
    history = [m for page in conv.pages for m in page.messages]
    ends = list(itertools.accumulate(len(page.messages) for page in conv.pages))
    docs: list[MemoryCard] = []
    for page, when in zip(conv.pages, exchange_dates(history, ends), strict=True):
        docs.append(page_doc(page.number, page.messages, "bench", 1.7e9, when))
        docs += cards_from_messages(page.messages, "bench", 1.7e9, page.number, when)
    return docs


def _build_seconds(docs: list[MemoryCard]) -> float:
    return _best(lambda: _timed(lambda: LayerIndex.build(docs, DEFAULT_SEARCH)), 5)


def _search_seconds(text: str, index: LayerIndex, params: SearchParams) -> float:
    return _best(lambda: _timed(lambda: search_layers(text, [("session", index)], 10, params=params)), 3)


def index_cost(conversations: Sequence[Any]) -> str:
    built = [(conv, _docs(conv)) for conv in conversations]
    lines = []
    with_periods = LayerIndex.add_periods
    for label, periods in (("with periods", with_periods), ("without periods", lambda *_: None)):
        LayerIndex.add_periods = periods  # type: ignore[method-assign]
        try:
            total = sum(_build_seconds(docs) for _, docs in built)
        finally:
            LayerIndex.add_periods = with_periods  # type: ignore[method-assign]
        lines.append(f"index build, {label}: {1000 * total:.0f} ms for {sum(len(d) for _, d in built):,} documents")
    for label, params in (("on", DEFAULT_SEARCH), ("off", replace(DEFAULT_SEARCH, time_weight=0.0))):
        times = []
        for conv, docs in built:
            index = LayerIndex.build(docs, params)
            times += [_search_seconds(q.text, index, params) for q in conv.questions]
        lines.append(f"search, time preference {label}: {1000 * statistics.fmean(times):.2f} ms, mean of {len(times)}")
    return "\n".join(lines)

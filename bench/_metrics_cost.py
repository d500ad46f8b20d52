"""What metrics add to one request, measured in-process (``overhead.py --metrics``).

With metrics on, a request costs ctxproxy two things it does not pay with ``[server] metrics =
false``: the middleware's one ``Metrics.request_done`` call (labels looked up, counters and
histograms updated, the price looked up), and the ``CountingStore`` wrapper around each store
call. Both are timed here on their own, many times, best of several runs (other processes on a
shared machine can only slow a run down). The request's stopwatch (``ctxproxy.stopwatch``: the
whole request, one upstream call) runs with metrics on or off, since the log line reads it; it is
timed too, for the record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxproxy.config import ConfigHolder
from ctxproxy.config.loader import Config
from ctxproxy.config.models import ModelConfig, ProxySettings, TenantConfig
from ctxproxy.metrics import CountingStore, Metrics
from ctxproxy.stopwatch import timing, upstream_call
from ctxproxy.store import JSONValue

ROUTE = "/v1/chat/completions"
FIELDS: dict[str, Any] = {
    "tenant": "default",
    "session": "s_0123456789abcdef01234567",
    "model": "gpt-4o-mini",
    "stream": False,
    "tokens_before": 41_250,
    "tokens_after": 12_080,
    "memories": 3,
    "compacted": False,
    "upstream_status": 200,
    "tool_calls": {"recall_page": 1},
}
STORE_CALLS_PER_REQUEST = 4  # a chat request's reads and writes: checkpoints, memories, the session record


class MemoryStore:
    """Just enough of a Store for timing the wrapper: a dict, no I/O."""

    def __init__(self) -> None:
        self.data: dict[str, JSONValue] = {}

    async def get(self, key: str) -> JSONValue | None:
        return self.data.get(key)


def _best(runs: int, n: int, once: Callable[[], None]) -> float:
    """Seconds per call: the best of ``runs`` runs of ``n`` calls."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(n):
            once()
        best = min(best, (time.perf_counter() - started) / n)
    return best


async def _best_async(runs: int, n: int, once: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        for _ in range(n):
            await once()
        best = min(best, (time.perf_counter() - started) / n)
    return best


def measure(n: int = 20_000, runs: int = 5) -> dict[str, float]:
    """Seconds per request (or per store call) of each part."""
    tenant = TenantConfig(name="default", models={"gpt-4o*": ModelConfig(input_price_per_mtok=0.15)})
    holder = ConfigHolder(Config(Path("."), ProxySettings(), {"default": tenant}))
    metrics = Metrics(holder)

    def stopwatch_only() -> Any:
        with timing() as watch:
            with upstream_call() as answered:
                answered()
        return watch

    watch = stopwatch_only()
    record = _best(runs, n, lambda: metrics.request_done(ROUTE, 200, FIELDS, watch))
    stopwatch = _best(runs, n, stopwatch_only)
    inner = MemoryStore()
    counted = CountingStore(inner, metrics.store_error)  # type: ignore[arg-type]
    raw_get = asyncio.run(_best_async(runs, n, lambda: inner.get("k")))
    counted_get = asyncio.run(_best_async(runs, n, lambda: counted.get("k")))
    wrapper = max(0.0, counted_get - raw_get)
    return {
        "request_done": record,
        "store_wrapper_per_call": wrapper,
        "metrics_per_request": record + STORE_CALLS_PER_REQUEST * wrapper,
        "stopwatch_per_request": stopwatch,
    }


def report(n: int = 20_000, runs: int = 5) -> str:
    got = measure(n, runs)
    us = {name: seconds * 1e6 for name, seconds in got.items()}
    verdict = "within" if got["metrics_per_request"] < 50e-6 else "OVER"
    return "\n".join(
        [
            f"In-process, best of {runs} runs of {n} calls each (µs):\n",
            "| part | µs |",
            "|---|---|",
            f"| `Metrics.request_done` (one per request) | {us['request_done']:.1f} |",
            f"| `CountingStore` wrapper, per store call | {us['store_wrapper_per_call']:.2f} |",
            f"| **metrics on − off, per request** (request_done + {STORE_CALLS_PER_REQUEST} store calls) "
            f"| **{us['metrics_per_request']:.1f}** |",
            f"| stopwatch (on or off: the log line reads it) | {us['stopwatch_per_request']:.1f} |",
            "",
            f"Metrics cost {us['metrics_per_request'] / 1000:.3f} ms per request: {verdict} the aim of 0.05 ms.",
        ]
    )

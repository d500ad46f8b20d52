"""Every metric ctxproxy exposes, built in one app's own ``CollectorRegistry`` (never the global
default one: two apps in one process count apart).

Label values are bounded by their makers: tenants are config names, routes are route templates,
models fold into ``other`` past a limit (``ctxproxy.metrics.recording``), and the rest come
from fixed vocabularies (strategies, modes, kinds, outcomes, tools, store operations).
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

import ctxproxy

# Seconds. A request waits on a model (up to minutes); ctxproxy's own share is milliseconds.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
OVERHEAD_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
SUMMARY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


@dataclass(frozen=True)
class CostCollectors:
    """What prompts cost with the provider's prompt cache (``ctxproxy.pipeline.pricing``)."""

    cache_prefix_tokens: Counter
    input_usd: Counter
    saved_usd: Gauge

    @classmethod
    def build(cls, registry: CollectorRegistry) -> CostCollectors:
        return cls(
            cache_prefix_tokens=Counter(
                "ctxproxy_cache_prefix_tokens",
                "Forwarded prompt tokens that repeat the session's previous forwarded prompt (X-Ctx-Cache-Prefix)",
                ("tenant", "model"),
                registry=registry,
            ),
            input_usd=Counter(
                "ctxproxy_input_usd",
                "Prompts priced with the provider's prompt cache ([models] prices): as the client sent them "
                "(before) and as forwarded (after)",
                ("tenant", "model", "stage"),
                registry=registry,
            ),
            saved_usd=Gauge(
                "ctxproxy_saved_usd",
                "input_usd before - after since the process started: negative when compaction cost more than it saved",
                ("tenant", "model"),
                registry=registry,
            ),
        )


@dataclass(frozen=True)
class ToolOutputCollectors:
    """Tool results compressed and masked (``ctxproxy.pipeline.tool_outputs``)."""

    results: Counter
    saved_tokens: Counter

    @classmethod
    def build(cls, registry: CollectorRegistry) -> ToolOutputCollectors:
        return cls(
            results=Counter(
                "ctxproxy_tool_outputs",
                "Client tool results forwarded compressed or masked (the sums of X-Ctx-Tool-Outputs); fresh: those "
                "compressed for the first time",
                ("tenant", "action"),
                registry=registry,
            ),
            saved_tokens=Counter(
                "ctxproxy_tool_output_saved_tokens",
                "Prompt tokens that compressing and masking tool results took out of forwarded requests",
                ("tenant",),
                registry=registry,
            ),
        )


@dataclass(frozen=True)
class Collectors:
    requests: Counter
    prompt_tokens: Counter
    compactions: Counter
    overflow_retries: Counter
    tool_calls: Counter
    memories: Counter
    tool_outputs: ToolOutputCollectors
    cost: CostCollectors
    store_errors: Counter
    request_seconds: Histogram
    first_byte_seconds: Histogram
    summarizer_seconds: Histogram
    overhead_seconds: Histogram

    @classmethod
    def build(cls, registry: CollectorRegistry, generation: Callable[[], float]) -> Collectors:
        """The metrics, registered in ``registry``; ``generation``: the live config's number."""
        _gauges(registry, generation)

        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        def histogram(name: str, doc: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=registry)

        return cls(
            requests=counter("ctxproxy_requests", "Requests answered", ("tenant", "route", "status")),
            prompt_tokens=counter(
                "ctxproxy_prompt_tokens",
                "Prompt tokens of answered requests: as the client sent them (before) and as forwarded (after)",
                ("tenant", "model", "stage"),
            ),
            compactions=counter(
                "ctxproxy_compactions",
                "Compactions run (kind: planned by the strategy, emergency to fit the window, recovery after an "
                "upstream overflow)",
                ("tenant", "strategy", "mode", "kind"),
            ),
            overflow_retries=counter(
                "ctxproxy_overflow_retries", "Upstream context overflows and what came of them", ("tenant", "outcome")
            ),
            tool_calls=counter(
                "ctxproxy_proxy_tool_calls", "Calls of ctxproxy's own tools answered", ("tenant", "tool")
            ),
            memories=counter("ctxproxy_memories_injected", "Memories injected into forwarded requests", ("tenant",)),
            tool_outputs=ToolOutputCollectors.build(registry),
            cost=CostCollectors.build(registry),
            store_errors=counter("ctxproxy_store_errors", "Store operations that failed", ("op",)),
            request_seconds=histogram(
                "ctxproxy_request_seconds", "Time to answer a request, whole", ("tenant", "route"), REQUEST_BUCKETS
            ),
            first_byte_seconds=histogram(
                "ctxproxy_upstream_first_byte_seconds",
                "From sending a request upstream to its answer's headers (forwarded requests and tool rounds)",
                ("tenant",),
                REQUEST_BUCKETS,
            ),
            summarizer_seconds=histogram(
                "ctxproxy_summarizer_seconds",
                "Time to execute a compaction's plan (summarising, archiving)",
                ("tenant", "summarizer"),
                SUMMARY_BUCKETS,
            ),
            overhead_seconds=histogram(
                "ctxproxy_overhead_seconds",
                "Time a request spent in ctxproxy itself: its whole time minus the upstream's and the summariser's",
                ("route",),
                OVERHEAD_BUCKETS,
            ),
        )


def _gauges(registry: CollectorRegistry, generation: Callable[[], float]) -> None:
    """The process's own facts, read when scraped."""
    Info("ctxproxy_build", "ctxproxy's version and Python's", registry=registry).info(
        {"version": ctxproxy.__version__, "python": platform.python_version()}
    )
    Gauge(
        "ctxproxy_config_generation", "Config loads so far: 1 at start, +1 per reload (SIGHUP)", registry=registry
    ).set_function(generation)

"""Recording: one ``Metrics`` per app, fed from one place per fact.

- ``request_done``: the request middleware, once per request, with the facts the request's
  journey collected in its log fields (tenant, model, tokens before/after, memories, proxy-tool
  calls, the overflow's outcome) and its stopwatch (``ctxproxy.stopwatch``: whole time, time
  away, first bytes). Prompt tokens are counted for answers that carried ``X-Ctx-Tokens-*``:
  every request the pipeline forwarded, unless ctxproxy answered it with an error of its own;
  so are their cache prefix (``X-Ctx-Cache-Prefix``) and, for priced models, their cost with
  the provider's prompt cache as sent and as forwarded (``ctxproxy.pipeline.pricing``), whose
  difference is ``saved_usd`` (a gauge: a compaction that breaks the cache makes it go down).
  Requests are counted ``BATCH`` at a time, and whatever waits is counted before anything reads
  the registry (a scrape, filtered or not): what a read shows is what counting each request
  as it ended would have shown.
- ``compacted`` / ``summarized``: the compaction engine, through its observer port
  (``ctxproxy.compaction.observer``), for every compaction, background ones included.
- ``store_error``: the store, wrapped (``ctxproxy.metrics.store``).
- ``zero_tenants``: before each scrape, every configured tenant's counters are made to exist at
  0 (for the per-model ones, model ``none``; for compactions, the tenant's strategy and mode),
  so a dashboard shows 0 for a tenant without traffic, not "No data".

Models are labelled by name up to ``MODELS_PER_TENANT`` distinct names per tenant; any further
one, and any name longer than ``MAX_MODEL_CHARS``, is counted as ``other``: a client chooses the
model string, and every label value is a series kept forever.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeGuard, get_args

from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric

from ctxproxy.compaction.observer import CompactionKind
from ctxproxy.config import ConfigHolder
from ctxproxy.metrics.collectors import Collectors
from ctxproxy.pipeline.run import OVERFLOW_OUTCOMES
from ctxproxy.stopwatch import Stopwatch
from ctxproxy.vocabulary import RECALL_PAGE, RETRIEVE, SEARCH_MEMORY

TOOL_OUTPUT_ACTIONS = ("compressed", "masked", "fresh")  # ctxproxy_tool_outputs' action label
_TOOL_OUTPUT_FIELDS = tuple((action, f"tool_outputs_{action}") for action in TOOL_OUTPUT_ACTIONS)  # and its log field

MODELS_PER_TENANT = 50
BATCH = 64  # requests ended that are counted together (``Metrics.request_done``)
MAX_MODEL_CHARS = 100
OTHER = "other"
NO_MODEL = "none"
ZEROED_ROUTES = ("/v1/chat/completions", "/v1/messages")  # the routes that compact: their 200s start at 0


class ModelLabels:
    """The label of a tenant's model: its name, or ``other`` past the limit (module docstring)."""

    def __init__(self, limit: int = MODELS_PER_TENANT) -> None:
        self._limit = limit
        self._seen: dict[str, set[str]] = {}

    def __call__(self, tenant: str, model: object) -> str:
        if not isinstance(model, str) or not model:
            return NO_MODEL
        if len(model) > MAX_MODEL_CHARS:
            return OTHER
        seen = self._seen.setdefault(tenant, set())
        if model not in seen:
            if len(seen) >= self._limit:
                return OTHER
            seen.add(model)
        return model


class Children:
    """The metrics' children, each looked up once and kept: ``labels()`` takes a lock and checks its
    arguments on every call, several microseconds a request. A child is kept in ``kept`` under
    ``(metric, label values)``; ``Metrics`` keeps there too, as one entry each, the children one
    request feeds together, under that request's label values (no metric first: no key of a
    child's). Label values are bounded (module docstring), so this is too."""

    __slots__ = ("kept",)

    def __init__(self) -> None:
        self.kept: dict[tuple[Any, ...], Any] = {}

    def __call__(self, metric: MetricWrapperBase, *values: str) -> Any:
        key = (metric, values)
        child = self.kept.get(key)
        if child is None:
            child = self.kept[key] = metric.labels(*values)
        return child


class _Ended(NamedTuple):
    """A request ended (``Metrics.request_done``), as it is counted."""

    route: str
    status: int
    fields: Mapping[str, Any]
    elapsed: float
    own: float
    first_bytes: list[float]
    own_error: bool


class _CountFirst:
    """A collector that collects nothing: it has the requests that ended counted before the
    registry's metrics are read."""

    def __init__(self, count: Callable[[], None]) -> None:
        self._count = count

    def collect(self) -> Iterator[Metric]:
        self._count()
        return iter(())


class _RequestChildren(NamedTuple):
    """A request's children, by tenant, route and status."""

    requests: Any  # ctxproxy_requests_total
    seconds: Any  # ctxproxy_request_seconds
    overhead: Any  # ctxproxy_overhead_seconds


@dataclass(frozen=True, slots=True)
class _ModelChildren:
    """A model's children of the token and cost metrics, by tenant and model (for a model labelled
    by its name)."""

    before: Any  # ctxproxy_prompt_tokens, stage before
    after: Any
    cache_prefix: Any
    usd_before: Any
    usd_after: Any
    saved_usd: Any


class Metrics:
    """One app's metrics: its registry, its collectors, and what feeds them."""

    def __init__(self, holder: ConfigHolder, models_per_tenant: int = MODELS_PER_TENANT) -> None:
        self._holder = holder
        self.registry = CollectorRegistry(auto_describe=True)
        # Requests ended and not yet counted (``request_done``): counted by ``BATCH``, and before
        # anything reads the registry (registered first, it is collected first).
        self._ended: deque[_Ended] = deque()
        self._counting = threading.Lock()
        self.registry.register(_CountFirst(self.count_ended))
        self._c = Collectors.build(self.registry, lambda: holder.generation)
        self._of = Children()
        self._kept = self._of.kept  # a request's children (_RequestChildren), a named model's (_ModelChildren)
        self._models = ModelLabels(models_per_tenant)

    def request_done(
        self, route: str, status: int, fields: Mapping[str, Any], watch: Stopwatch, *, own_error: bool = False
    ) -> None:
        """One request ended: ``fields`` are its log fields, ``watch`` its time; ``own_error``: ctxproxy
        answered it with an error of its own (no ``X-Ctx-Tokens-*`` headers). Counted with the next
        ``BATCH`` or when the registry is read, whichever comes first: many requests' counting in
        a row costs each about half of what it costs between two requests' other work."""
        self._ended.append(_Ended(route, status, fields, watch.elapsed, watch.own, watch.first_bytes, own_error))
        if len(self._ended) >= BATCH:
            self.count_ended()

    def count_ended(self) -> None:
        """Count the requests ended since the last time."""
        with self._counting:
            ended = self._ended
            while ended:
                self._count(*ended.popleft())

    def _count(
        self,
        route: str,
        status: int,
        fields: Mapping[str, Any],
        elapsed: float,
        own: float,
        first_bytes: list[float],
        own_error: bool,
    ) -> None:
        c, of = self._c, self._of
        tenant = str(fields.get("tenant", ""))
        answered = (tenant, route, status)
        children = self._kept.get(answered)
        if children is None:  # tenants, routes and statuses are bounded: so is this
            children = self._kept[answered] = _RequestChildren(
                of(c.requests, tenant, route, str(status)),
                of(c.request_seconds, tenant, route),
                of(c.overhead_seconds, route),
            )
        requests, whole, overhead = children
        requests.inc()
        whole.observe(elapsed)
        overhead.observe(own)
        for seconds in first_bytes:
            of(c.first_byte_seconds, tenant).observe(seconds)
        outcome = fields.get("overflow_outcome")
        if isinstance(outcome, str):
            of(c.overflow_retries, tenant, outcome).inc()
        memories = fields.get("memories")
        if isinstance(memories, int) and memories > 0:
            of(c.memories, tenant).inc(memories)
        self._tool_outputs(tenant, fields)
        calls = fields.get("tool_calls")
        if isinstance(calls, Mapping):
            for tool, n in calls.items():
                of(c.tool_calls, tenant, str(tool)).inc(n)
        if not own_error:
            self._tokens(tenant, fields)

    def _tool_outputs(self, tenant: str, fields: Mapping[str, Any]) -> None:
        """The tool-output step's counts (``ctxproxy.pipeline.tool_outputs``), as the log line has them."""
        c, of = self._c, self._of
        for action, field in _TOOL_OUTPUT_FIELDS:
            n = fields.get(field)
            if isinstance(n, int) and n > 0:
                of(c.tool_outputs.results, tenant, action).inc(n)
        saved = fields.get("tool_outputs_saved")
        if isinstance(saved, int) and saved > 0:
            of(c.tool_outputs.saved_tokens, tenant).inc(saved)

    def _tokens(self, tenant: str, fields: Mapping[str, Any]) -> None:
        before, after = fields.get("tokens_before"), fields.get("tokens_after")
        if not isinstance(before, int) or not isinstance(after, int):
            return  # not forwarded
        children = self._model_children(tenant, fields.get("model"))
        children.before.inc(before)
        children.after.inc(after)
        prefix = fields.get("cache_prefix_tokens")
        if isinstance(prefix, int) and prefix > 0:
            children.cache_prefix.inc(prefix)
        usd_before, usd_after = fields.get("usd_before"), fields.get("usd_after")
        if _money(usd_before) and _money(usd_after):  # priced (ctxproxy.pipeline.pricing)
            children.usd_before.inc(usd_before)
            children.usd_after.inc(usd_after)
            children.saved_usd.inc(usd_before - usd_after)

    def _model_children(self, tenant: str, model: object) -> _ModelChildren:
        """The model's children of the token and cost metrics; kept for a model labelled by its
        name (at most ``MODELS_PER_TENANT`` a tenant, and its label never changes), made anew for
        the others."""
        if isinstance(model, str):
            kept: _ModelChildren | None = self._kept.get((tenant, model))
            if kept is not None:
                return kept
        label = self._models(tenant, model)
        c, of = self._c, self._of
        children = _ModelChildren(
            of(c.prompt_tokens, tenant, label, "before"),
            of(c.prompt_tokens, tenant, label, "after"),
            of(c.cost.cache_prefix_tokens, tenant, label),
            of(c.cost.input_usd, tenant, label, "before"),
            of(c.cost.input_usd, tenant, label, "after"),
            of(c.cost.saved_usd, tenant, label),
        )
        if isinstance(model, str) and label == model:
            self._kept[(tenant, model)] = children
        return children

    def zero_tenants(self) -> None:
        """Every configured tenant's counters, at 0 until something counts (module docstring)."""
        c, of = self._c, self._of
        for name, tenant in self._holder.current.tenants.items():
            for route in ZEROED_ROUTES:
                of(c.requests, name, route, "200")
            for stage in ("before", "after"):
                of(c.prompt_tokens, name, NO_MODEL, stage)
            of(c.cost.cache_prefix_tokens, name, NO_MODEL)
            for stage in ("before", "after"):
                of(c.cost.input_usd, name, NO_MODEL, stage)
            of(c.cost.saved_usd, name, NO_MODEL)
            for kind in get_args(CompactionKind):
                of(c.compactions, name, tenant.compaction.strategy, tenant.compaction.mode, kind)
            for outcome in OVERFLOW_OUTCOMES:
                of(c.overflow_retries, name, outcome)
            for tool in (RECALL_PAGE, SEARCH_MEMORY, RETRIEVE):
                of(c.tool_calls, name, tool)
            of(c.memories, name)
            for action in TOOL_OUTPUT_ACTIONS:
                of(c.tool_outputs.results, name, action)
            of(c.tool_outputs.saved_tokens, name)

    # --- the compaction engine's observer (ctxproxy.compaction.observer) ---

    def compacted(self, tenant: str, strategy: str, mode: str, kind: CompactionKind) -> None:
        self._of(self._c.compactions, tenant, strategy, mode, kind).inc()

    def summarized(self, tenant: str, summarizer: str, seconds: float) -> None:
        self._of(self._c.summarizer_seconds, tenant, summarizer).observe(seconds)

    # --- the store's (ctxproxy.metrics.store) ---

    def store_error(self, op: str) -> None:
        self._of(self._c.store_errors, op).inc()


def _money(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)

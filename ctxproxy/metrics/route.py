"""``GET /metrics``: the app's registry in Prometheus' text format (or OpenMetrics, when the
scraper's ``Accept`` asks for it; ``prometheus_client`` negotiates, and filters by ``name[]``).

Served on the main port while ``[server] metrics`` is on (the default); with ``[server]
metrics_auth = true`` the scraper must show the admin key, checked by the admin API's own check
(the ``guard`` the app hands over). Each scrape first makes sure every configured tenant's
counters exist (``Metrics.zero_tenants``), so a dashboard shows 0, not "No data", for a tenant
without traffic yet. The ``*_created`` series ``prometheus_client`` adds to every counter and
histogram (one per label set: they doubled the series count, and no query of ours reads them)
are left out of what is exposed (``WithoutCreated``), not switched off in the library, whose
switch is process-wide.

Also where a request's ``route`` label comes from: the route template it matched, the tenant
prefix left out, and for a relayed path (``/v1/{tail}``) one of ``RELAYED_ROUTES`` when it is, or
lies below, one of them (``/v1/files/file-abc/content`` is ``/v1/files``); any other relayed path
stays ``/v1/{tail}``. The values are bounded: no label ever holds what the client wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.metrics_core import Metric

from ctxproxy.metrics.recording import Metrics
from ctxproxy.services import CONFIG

METRICS = web.AppKey("metrics", Metrics)
METRICS_PATH = "/metrics"
TENANT_PREFIX = "/t/{tenant}"
UNMATCHED = "unmatched"
RELAYED = "/v1/{tail}"
# Relayed paths (after /v1) with a route label of their own, the longer before the shorter.
RELAYED_ROUTES = ("messages/count_tokens", "messages/batches", "models", "embeddings", "responses", "files", "batches")

Guard = Callable[[web.Request], None]  # raises ProxyError when the request may not see the metrics


class WithoutCreated:
    """A collector: ``registry``'s metrics without their ``*_created`` samples. It describes
    itself with ``registry``'s metrics, so a scrape's ``name[]`` filter finds them."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def describe(self) -> list[Metric]:
        return list(self._registry.collect())

    def collect(self) -> Iterator[Metric]:
        for metric in self._registry.collect():
            metric.samples = [sample for sample in metric.samples if not sample.name.endswith("_created")]
            yield metric


def add_metrics_route(app: web.Application, metrics: Metrics, guard: Guard) -> None:
    app[METRICS] = metrics
    exposed = CollectorRegistry(auto_describe=False)
    exposed.register(WithoutCreated(metrics.registry))
    expose = make_aiohttp_handler(exposed)

    async def scrape(request: web.Request) -> web.StreamResponse:
        if request.app[CONFIG].current.settings.server.metrics_auth:
            guard(request)
        metrics.zero_tenants()
        return await expose(request)

    app.router.add_get(METRICS_PATH, scrape)


def route_label(request: web.Request) -> str:
    """The route template a request matched, the tenant prefix left out (the tenant is a label
    of its own; ``/t/{tenant}`` itself is ``/``); ``unmatched`` when it matched none. Never the
    raw path: that is the client's."""
    resource = request.match_info.route.resource
    if resource is None:
        return UNMATCHED
    route = resource.canonical.removeprefix(TENANT_PREFIX)
    if route == RELAYED:
        tail = request.match_info.get("tail", "")
        known = next((known for known in RELAYED_ROUTES if tail == known or tail.startswith(known + "/")), None)
        return RELAYED if known is None else f"/v1/{known}"
    return route or "/"

"""``GET /metrics``: the app's registry in Prometheus' text format (or OpenMetrics, when the
scraper's ``Accept`` asks for it; ``prometheus_client`` negotiates, and filters by ``name[]``).

Served on the main port while ``[server] metrics`` is on (the default); with ``[server]
metrics_auth = true`` the scraper must show the admin key, checked by the admin API's own check
(the ``guard`` the app hands over). Also where a request's ``route`` label comes from.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler

from ctxproxy.metrics.recording import Metrics
from ctxproxy.services import CONFIG

METRICS = web.AppKey("metrics", Metrics)
METRICS_PATH = "/metrics"
TENANT_PREFIX = "/t/{tenant}"
UNMATCHED = "unmatched"

Guard = Callable[[web.Request], None]  # raises ProxyError when the request may not see the metrics


def add_metrics_route(app: web.Application, metrics: Metrics, guard: Guard) -> None:
    app[METRICS] = metrics
    expose = make_aiohttp_handler(metrics.registry)

    async def scrape(request: web.Request) -> web.StreamResponse:
        if request.app[CONFIG].current.settings.server.metrics_auth:
            guard(request)
        return await expose(request)

    app.router.add_get(METRICS_PATH, scrape)


def route_label(request: web.Request) -> str:
    """The route template a request matched, the tenant prefix left out (the tenant is a label
    of its own; ``/t/{tenant}`` itself is ``/``); ``unmatched`` when it matched none. Never the
    raw path: that is the client's."""
    resource = request.match_info.route.resource
    if resource is None:
        return UNMATCHED
    return resource.canonical.removeprefix(TENANT_PREFIX) or "/"

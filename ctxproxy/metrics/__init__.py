"""Prometheus metrics (``GET /metrics``), one registry per app.

- ``collectors``: every metric and its labels, built in the app's own registry;
- ``recording``: ``Metrics``, fed by the request middleware (one call per request), by the
  compaction engine's observer port and by the store's wrapper; model labels bounded;
- ``store``: ``CountingStore``, the store with its failures counted;
- ``route``: the ``/metrics`` route and a request's ``route`` label.
"""

from ctxproxy.metrics.recording import Metrics
from ctxproxy.metrics.route import METRICS, add_metrics_route, route_label
from ctxproxy.metrics.store import CountingStore

__all__ = ["METRICS", "CountingStore", "Metrics", "add_metrics_route", "route_label"]

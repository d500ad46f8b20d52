"""A tenant's time buckets: pure sums, robust to what a store hands back."""

from __future__ import annotations

from ctxproxy.session.records import Observation
from ctxproxy.session.tenant_stats import BUCKET_SECONDS, Totals, added, bucket_of, decode, totals


def test_buckets_start_on_their_boundary() -> None:
    assert bucket_of(0) == 0 and bucket_of(BUCKET_SECONDS - 0.1) == 0 and bucket_of(BUCKET_SECONDS) == BUCKET_SECONDS


def test_observations_add_up() -> None:
    a = Totals.of(Observation(1.0, 3, 1000, "h", None, forwarded=400, compacted=True))
    b = Totals.of(Observation(2.0, 5, 1000, "h", None, forwarded=600, retried=True))
    both = decode(added(added(None, a), b))
    assert both == Totals(requests=2, before=2000, after=1000, compactions=1, retries=1)
    assert both.saved_percent == 50.0 and Totals().saved_percent == 0.0


def test_a_request_that_never_reached_the_upstream_counts_no_tokens() -> None:
    """As ``ctxproxy_prompt_tokens`` does not: ctxproxy answered it with an error of its own."""
    refused = Totals.of(Observation(1.0, 3, 1000, "h", None, forwarded=900, reached_upstream=False))
    assert refused == Totals(requests=1, before=0, after=0)


def test_malformed_buckets_count_as_nothing() -> None:
    assert decode("junk") == Totals() and decode({"requests": -3, "before": True, "after": "9"}) == Totals()
    assert decode({"requests": 2, "before": 10}) == Totals(requests=2, before=10)


def test_totals_since() -> None:
    buckets = [(0, {"requests": 1}), (300, {"requests": 2}), (600, "junk"), (900, {"requests": 4})]
    assert totals(buckets, 300).requests == 6 and totals(buckets, 0).requests == 7 and totals([], 0) == Totals()

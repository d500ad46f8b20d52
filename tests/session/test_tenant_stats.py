"""A tenant's time buckets: pure sums, robust to what a store hands back."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.session.records import Observation
from ctxproxy.session.tenant_stats import BUCKET_SECONDS, FIELDS, Totals, added, bucket_of, decode, totals


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


_COUNT = st.integers(min_value=0, max_value=2**40)


@given(
    st.lists(_COUNT, min_size=len(FIELDS), max_size=len(FIELDS)),
    st.lists(_COUNT, min_size=len(FIELDS), max_size=len(FIELDS)),
)
def test_the_sum_is_field_by_field(a: list[int], b: list[int]) -> None:
    """``__add__`` names each field (it runs at every request): every field of ``FIELDS``, none swapped."""
    total = Totals(*a) + Totals(*b)
    assert [getattr(total, f) for f in FIELDS] == [x + y for x, y in zip(a, b, strict=True)]


@given(
    _COUNT,
    st.none() | _COUNT,
    st.booleans(),
    st.booleans(),
    st.none() | st.tuples(_COUNT, _COUNT),
    st.none() | st.tuples(_COUNT, _COUNT),
)
def test_an_observation_counts_as_its_history_line_says(
    tokens: int, forwarded: int | None, compacted: bool, retried: bool, billed: Any, usd: Any
) -> None:
    seen = Observation(1.0, 3, tokens, "h", None, forwarded, compacted, retried, billed=billed, nano_usd=usd)
    entry = seen.entry()
    assert Totals.of(seen) == Totals(
        1, entry["before"], entry["after"], int(compacted), int(retried), *(billed or (0, 0)), *(usd or (0, 0))
    )

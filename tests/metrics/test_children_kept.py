"""``Metrics.request_done`` keeps the children it feeds (a request's three, a named model's six):
on any sequence of requests the registry holds what counting each fact afresh gives, model
labels folded into ``other`` past the limit included."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.config import ConfigHolder
from ctxproxy.metrics import Metrics
from ctxproxy.metrics.recording import ModelLabels
from ctxproxy.stopwatch import Stopwatch
from tests.conftest import write_config

REQUESTS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),  # tenant
        st.sampled_from(["/v1/chat/completions", "/v1/messages"]),
        st.sampled_from([200, 400, 502]),
        st.sampled_from(["m1", "m2", "m3", "other", "", None, 7, "x" * 150]),  # model, as the log field has it
        st.one_of(st.none(), st.integers(0, 10_000)),  # tokens before (None: not forwarded)
        st.integers(0, 10_000),
        st.integers(0, 100),  # cache prefix tokens
        st.one_of(st.none(), st.floats(0, 1)),  # usd before (None: not priced)
        st.booleans(),  # own error
    ),
    max_size=40,
)


@pytest.fixture(scope="module")
def holder(tmp_path_factory: pytest.TempPathFactory) -> ConfigHolder:
    return ConfigHolder.load(write_config(tmp_path_factory.mktemp("config"), {"a": "", "b": ""}), {})


@settings(max_examples=100, deadline=None)
@given(requests=REQUESTS)
def test_kept_children_count_what_fresh_lookups_count(holder: ConfigHolder, requests: list[tuple[Any, ...]]) -> None:
    metrics = Metrics(holder, models_per_tenant=2)
    watch = Stopwatch()
    watch.stop()
    labels, expected = ModelLabels(2), Counter[tuple[str, tuple[str, ...]]]()
    for tenant, route, status, model, before, after, prefix, usd, own_error in requests:
        fields = {"tenant": tenant, "model": model, "tokens_before": before, "tokens_after": after}
        fields |= {"cache_prefix_tokens": prefix}
        if usd is not None:
            fields |= {"usd_before": usd, "usd_after": usd / 2}
        metrics.request_done(route, status, fields, watch, own_error=own_error)
        expected["ctxproxy_requests_total", (tenant, route, str(status))] += 1
        expected["ctxproxy_request_seconds_count", (tenant, route)] += 1
        if own_error or before is None:
            continue
        label = labels(tenant, model)
        expected["ctxproxy_prompt_tokens_total", (tenant, label, "before")] += before
        expected["ctxproxy_prompt_tokens_total", (tenant, label, "after")] += after
        if prefix:
            expected["ctxproxy_cache_prefix_tokens_total", (tenant, label)] += prefix
        if usd is not None:
            expected["ctxproxy_input_usd_total", (tenant, label, "before")] += usd
            expected["ctxproxy_input_usd_total", (tenant, label, "after")] += usd / 2
            expected["ctxproxy_saved_usd", (tenant, label)] += usd / 2
    names = {
        "ctxproxy_requests_total": ("tenant", "route", "status"),
        "ctxproxy_request_seconds_count": ("tenant", "route"),
        "ctxproxy_prompt_tokens_total": ("tenant", "model", "stage"),
        "ctxproxy_cache_prefix_tokens_total": ("tenant", "model"),
        "ctxproxy_input_usd_total": ("tenant", "model", "stage"),
        "ctxproxy_saved_usd": ("tenant", "model"),
    }
    for (name, values), value in expected.items():
        got = metrics.registry.get_sample_value(name, dict(zip(names[name], values, strict=True)))
        assert got is not None and abs(got - value) < 1e-9, (name, values)
    samples = {
        (sample.name, tuple(sample.labels[n] for n in names[sample.name]))
        for metric in metrics.registry.collect()
        for sample in metric.samples
        if sample.name in names and sample.value
    }
    assert samples <= set(expected)  # nothing counted that a fresh lookup would not have counted

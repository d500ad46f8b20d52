"""``GET /metrics`` on the main port: on by default, off with ``[server] metrics = false``, behind
the admin key with ``metrics_auth = true``; each app counts in a registry of its own."""

from __future__ import annotations

import aiohttp

from ctxproxy.metrics import METRICS
from ctxproxy.metrics.recording import BATCH
from ctxproxy.stopwatch import Stopwatch
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.metrics.scrape import parse, scrape

ADMIN = "adm-METRICS-key-42"


async def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers or {}) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), await resp.text()


async def chat(proxy: Proxy, model: str = "gpt-4o-mini") -> None:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as http, http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
        assert resp.status == 200


async def test_metrics_are_served_in_prometheus_text_format(proxy: Proxy, upstream: Upstream) -> None:
    await chat(proxy)
    status, content_type, text = await get(proxy.url("/metrics"))
    assert status == 200
    assert content_type.startswith("text/plain")
    assert "# TYPE ctxproxy_requests_total counter" in text
    assert "# TYPE ctxproxy_request_seconds histogram" in text
    scraped = parse(text)
    assert scraped.total("ctxproxy_requests_total", tenant="default", route="/v1/chat/completions") == 1


async def test_metrics_off_is_a_404(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy(proxy_toml="[server]\nmetrics = false\n")
    await chat(proxy)
    status, _, text = await get(proxy.url("/metrics"))
    assert status == 404
    assert '"code": "not_found"' in text or '"code":"not_found"' in text


async def test_metrics_auth_needs_the_admin_key(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy(proxy_toml=f'[server]\nmetrics_auth = true\n[admin]\napi_key = "{ADMIN}"\n')
    assert (await get(proxy.url("/metrics")))[0] == 401
    status, _, text = await get(proxy.url("/metrics"), {"Authorization": "Bearer not-the-key"})
    assert status == 401 and "invalid_admin_key" in text
    status, _, text = await get(proxy.url("/metrics"), {"Authorization": f"Bearer {ADMIN}"})
    assert status == 200 and "ctxproxy_requests_total" in text
    # The refusals were counted too, as 401s of the /metrics route.
    scraped = await scrape(proxy.url("/metrics"), {"Authorization": f"Bearer {ADMIN}"})
    assert scraped.total("ctxproxy_requests_total", route="/metrics", status="401") == 2


async def test_two_apps_count_apart(make_proxy: MakeProxy, upstream: Upstream) -> None:
    first = await make_proxy()
    second = await make_proxy()
    await chat(first)
    await chat(first)
    one = await scrape(first.url("/metrics"))
    other = await scrape(second.url("/metrics"))
    assert one.total("ctxproxy_requests_total", route="/v1/chat/completions") == 2
    assert other.total("ctxproxy_requests_total", route="/v1/chat/completions") == 0
    assert other.total("ctxproxy_prompt_tokens_total") == 0


async def test_no_created_series_and_name_filters_still_work(proxy: Proxy, upstream: Upstream) -> None:
    await chat(proxy)
    _, _, text = await get(proxy.url("/metrics"))
    assert "_created" not in text  # prometheus_client's per-label-set creation times: twice the series
    assert "ctxproxy_requests_total{" in text and "ctxproxy_request_seconds_bucket{" in text
    _, _, only = await get(proxy.url("/metrics?name[]=ctxproxy_requests_total"))
    assert {s.name for s in parse(only).samples} == {"ctxproxy_requests_total"}
    _, openmetrics, _ = await get(proxy.url("/metrics"), {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert openmetrics.startswith("application/openmetrics-text")


async def test_every_configured_tenant_starts_at_zero(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """Before any request, each tenant's counters exist at 0, so a dashboard shows 0, not "No data"."""
    proxy = await make_proxy(
        {
            "default": '[upstream]\nbase_url = "{upstream}"\n',
            "acme": '[upstream]\nbase_url = "{upstream}"\n[compaction]\nstrategy = "cut_point"\nmode = "background"\n',
        }
    )
    text = (await get(proxy.url("/metrics")))[2]
    scraped = parse(text)
    for tenant in ("default", "acme"):
        for route in ("/v1/chat/completions", "/v1/messages"):
            assert f'ctxproxy_requests_total{{route="{route}",status="200",tenant="{tenant}"}} 0.0' in text
        assert scraped.label_values("ctxproxy_prompt_tokens_total", "tenant") == {"default", "acme"}
        assert f'ctxproxy_memories_injected_total{{tenant="{tenant}"}} 0.0' in text
        outcomes = {s.labels["outcome"] for s in scraped.samples if s.name == "ctxproxy_overflow_retries_total"}
        assert outcomes == {"recovered", "refused_again", "not_compacted", "disabled", "retry_failed"}
    kinds = {
        (s.labels["strategy"], s.labels["mode"], s.labels["kind"])
        for s in scraped.samples
        if s.name == "ctxproxy_compactions_total" and s.labels["tenant"] == "acme"
    }
    assert kinds == {("cut_point", "background", k) for k in ("planned", "emergency", "recovery")}
    assert scraped.total("ctxproxy_requests_total") == 0
    await chat(proxy)
    after = await scrape(proxy.url("/metrics"))
    assert after.total("ctxproxy_requests_total", tenant="default", route="/v1/chat/completions", status="200") == 1


async def test_requests_are_counted_by_batch_and_before_any_read(proxy: Proxy, upstream: Upstream) -> None:
    """Ended requests are counted ``BATCH`` at a time (``Metrics.request_done``), and whatever is
    still waiting is counted before a scrape reads, a filtered one too (its registry is not the
    one the requests are counted in)."""
    metrics = proxy.server.app[METRICS]
    for _ in range(3):
        await chat(proxy)
    assert len(metrics._ended) == 3  # waiting: nothing has read the registry
    _, _, only = await get(proxy.url("/metrics?name[]=ctxproxy_prompt_tokens_total&name[]=ctxproxy_requests_total"))
    assert parse(only).total("ctxproxy_requests_total", route="/v1/chat/completions") == 3
    assert parse(only).total("ctxproxy_prompt_tokens_total", stage="before") > 0
    assert [ended.route for ended in metrics._ended] == ["/metrics"]  # the scrape itself waits now
    watch = Stopwatch()
    watch.stop()
    for _ in range(BATCH):
        metrics.request_done("/v1/messages", 200, {"tenant": "default"}, watch)
    assert [ended.route for ended in metrics._ended] == ["/v1/messages"]  # a whole batch was counted as it filled
    assert (
        metrics.registry.get_sample_value(
            "ctxproxy_requests_total", {"tenant": "default", "route": "/v1/messages", "status": "200"}
        )
        == BATCH
    )

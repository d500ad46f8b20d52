"""``ModelFacts``: a model's window, learned name and prices, memoised per ``[models]`` table,
name and hint, give what looking them up each time gives, and a reload is seen."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.compaction.window_hints import WindowHint
from ctxproxy.config import ConfigHolder
from ctxproxy.config.models import ModelConfig, TenantConfig
from ctxproxy.pipeline import model_facts
from ctxproxy.pipeline.model_facts import ModelFacts, looked_up
from tests.conftest import MakeProxy, Upstream, write_config
from tests.metrics.scrape import scrape

NAMES = st.sampled_from(
    [
        "gpt-4o",
        "gpt-4o-mini",
        "openai/gpt-4.1",
        "claude-sonnet-4-5[1m]",
        "claude-opus-4",
        "moonshot-v1-128k",
        "qwen2.5-7b-instruct-1m",
        "my-model[256k]",
        "llama-3.1-8b",
        "unknown-thing",
        "",
        "x" * 250,
    ]
)
MODELS = st.one_of(st.none(), NAMES, st.text(max_size=12))
HINTS = st.one_of(st.none(), st.builds(WindowHint, st.sampled_from([200_000, 1_000_000]), st.just("header")))
PATTERNS = st.dictionaries(
    st.sampled_from(["gpt-4o*", "claude*", "*", "my-model*", "qwen*"]),
    st.fixed_dictionaries(
        {
            "context_window": st.one_of(st.none(), st.sampled_from([8192, 32_000, 200_000])),
            "input_price_per_mtok": st.one_of(st.none(), st.sampled_from([0.5, 3.0])),
            "cached_input_price_per_mtok": st.one_of(st.none(), st.just(0.3)),
            "cache_discount": st.one_of(st.none(), st.just(0.25)),
        }
    )
    .filter(lambda values: any(v is not None for v in values.values()))
    .map(lambda values: ModelConfig(**values)),
    max_size=3,
)


def _holder(tmp_path: Path, tenant_toml: str) -> ConfigHolder:
    return ConfigHolder.load(write_config(tmp_path, {"t": tenant_toml}), {})


@pytest.fixture(scope="module")
def holder(tmp_path_factory: pytest.TempPathFactory) -> ConfigHolder:
    return _holder(tmp_path_factory.mktemp("config"), "")


@settings(max_examples=150, deadline=None)
@given(tables=st.lists(PATTERNS, min_size=1, max_size=3), asks=st.lists(st.tuples(MODELS, HINTS), max_size=25))
def test_the_memo_gives_what_a_lookup_gives(
    holder: ConfigHolder, tables: list[dict[str, ModelConfig]], asks: list[tuple[str | None, WindowHint | None]]
) -> None:
    facts = ModelFacts(holder)
    tenants = [TenantConfig(name="t", models=table) for table in tables]
    # the same tenant with other strategy options shares its table, and so its memo
    tenants += [t.model_copy(update={"default_context_window": 64_000}) for t in tenants]
    for n, (model, asked) in enumerate(asks * 2):  # each ask twice: looked up, then remembered
        tenant = tenants[n % len(tenants)]
        assert facts.of(tenant, model, asked) == looked_up(tenant, model, asked)


def test_a_reload_is_seen(tmp_path: Path) -> None:
    holder = _holder(tmp_path, '[models."gpt-4o*"]\ncontext_window = 9000\ninput_price_per_mtok = 2.0\n')
    facts = ModelFacts(holder)
    first = facts.of(holder.current.tenants["t"], "gpt-4o", None)
    assert (first.window, first.prices.per_mtok) == (9000, 2.0)
    write_config(tmp_path, {"t": '[models."gpt-4o*"]\ncontext_window = 7000\n'})
    assert holder.reload()
    second = facts.of(holder.current.tenants["t"], "gpt-4o", None)
    assert (second.window, second.prices.per_mtok) == (7000, None)
    assert second == looked_up(holder.current.tenants["t"], "gpt-4o", None)


def test_the_memo_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    holder = _holder(tmp_path, "")
    facts = ModelFacts(holder)
    tenant = holder.current.tenants["t"]
    monkeypatch.setattr(model_facts, "ENTRIES", 4)
    for n in range(10):
        assert facts.of(tenant, f"gpt-4o-{n}", None).window == 128_000
        assert len(facts._memo) <= 4
    facts.of(tenant, "y" * 300, None)  # a name this long is not kept
    assert all(key[1] != "y" * 300 for key in facts._memo)


async def test_a_reload_reprices_the_next_request_over_http(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """Served: the memo is the app's, and a reload (SIGHUP's ``ConfigHolder.reload``) is seen
    by the next request (its price, as ``ctxproxy_input_usd`` counts it)."""
    tenant = '[upstream]\nbase_url = "{upstream}"\n[models."gpt-4o*"]\ninput_price_per_mtok = %s\n'
    proxy = await make_proxy({"default": tenant % "1000.0"})
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello there"}]}

    async def priced() -> float:
        async with aiohttp.ClientSession() as http:
            async with http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
                assert resp.status == 200
        return (await scrape(proxy.url("/metrics"))).total("ctxproxy_input_usd_total", stage="before")

    first = await priced()
    assert first > 0 and await priced() == pytest.approx(2 * first)
    write_config(proxy.config_dir, {"default": (tenant % "2000.0").replace("{upstream}", upstream.base_url)})
    assert proxy.holder.reload()
    assert await priced() == pytest.approx(4 * first)  # twice the price, from the reloaded table

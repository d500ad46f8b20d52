"""Pricing a prompt with the provider's cache: which pattern's prices apply, what the default
discount is, and where the forwarded prompt's cached tokens come from."""

from __future__ import annotations

import pytest

from ctxproxy.config.models import ModelConfig, TenantConfig
from ctxproxy.pipeline.pricing import Costs, Prices, PromptCost, forwarded_cached


def tenant(**patterns: ModelConfig) -> TenantConfig:
    return TenantConfig(name="t", models={k.replace("_", "-") + "*": v for k, v in patterns.items()})


def test_the_cached_price_is_the_price_times_the_discount_by_default() -> None:
    prices = Prices.of(tenant(gpt=ModelConfig(input_price_per_mtok=2.0)), "gpt-4o")
    assert prices == Prices(2.0, pytest.approx(0.2), 0.1)


def test_each_value_comes_from_the_first_pattern_that_sets_it() -> None:
    priced = tenant(gpt_4o=ModelConfig(cache_discount=0.5), gpt=ModelConfig(input_price_per_mtok=2.0))
    assert Prices.of(priced, "gpt-4o-mini") == Prices(2.0, 1.0, 0.5)
    assert Prices.of(priced, "gpt-3.5") == Prices(2.0, pytest.approx(0.2), 0.1)
    assert Prices.of(priced, "claude-3") == Prices(None, None, 0.1)  # not priced: no dollars, still a discount


def test_two_prices_give_their_ratio_as_the_discount() -> None:
    both = tenant(m=ModelConfig(input_price_per_mtok=3.0, cached_input_price_per_mtok=0.3))
    assert Prices.of(both, "m1") == Prices(3.0, 0.3, pytest.approx(0.1))
    stated = tenant(m=ModelConfig(input_price_per_mtok=3.0, cached_input_price_per_mtok=0.3, cache_discount=0.5))
    assert Prices.of(stated, "m1") == Prices(3.0, 0.3, 0.5)  # the discount as stated prices the tokens


def test_a_prompt_costs_its_uncached_tokens_and_a_fraction_of_its_cached_ones() -> None:
    prices = Prices(2.0, 0.2, 0.1)
    cost = PromptCost(tokens=10_000, cached=8_000)
    assert cost.billed(prices) == pytest.approx(2_000 + 800)
    assert cost.usd(prices) == pytest.approx((2_000 * 2.0 + 8_000 * 0.2) / 1e6)
    assert cost.usd(Prices(None, None, 0.1)) is None


def test_the_upstream_report_is_a_share_of_ctxproxys_count_else_the_prefix() -> None:
    assert forwarded_cached(1000, 900, (1200, 300)) == (250, "upstream")  # a quarter of 1,000
    assert forwarded_cached(1000, 900, (1200, 0)) == (0, "upstream")  # the provider missed
    assert forwarded_cached(1000, 900, None) == (900, "prefix")
    assert forwarded_cached(1000, 900, (0, 0)) == (900, "prefix")  # a server that does not count


def test_a_compaction_that_rewrites_the_cached_prefix_saves_less_than_its_tokens() -> None:
    prices = Prices(2.0, 0.2, 0.1)
    # As sent, 9,000 of 10,000 tokens repeat the previous prompt; compacted to 4,000, none does.
    costs = Costs(prices, PromptCost(10_000, 9_000), PromptCost(4_000, 0), "prefix")
    fields = costs.fields()
    assert fields["billed_before"] == 1_900 and fields["billed_after"] == 4_000
    assert fields["usd_before"] - fields["usd_after"] < 0  # counted in tokens it saved 6,000

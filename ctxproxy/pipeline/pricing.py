"""What a request's prompt costs with the provider's prompt cache, as the client sent it and as it
was forwarded: the figures behind ``ctxproxy_saved_usd`` and the inspector's money. Pure.

A prompt of T tokens of which C are read from the provider's cache costs
(T − C) × price + C × cached price; in full-price tokens ("billed"), T − C + discount × C. Prices
are the first ``[models."<glob>"]`` pattern's that sets each: ``input_price_per_mtok``,
``cached_input_price_per_mtok`` (default: the price × the discount) and ``cache_discount``
(default ``DEFAULT_CACHE_DISCOUNT``; with both prices set, their ratio).

As forwarded, C is what the upstream reported — OpenAI's ``usage.prompt_tokens_details.cached_tokens``
of ``prompt_tokens``, Anthropic's ``cache_read_input_tokens`` of the whole prompt — as a share of its
own count, applied to ctxproxy's; without a report (a proxy-tool loop's rounds, a server that
says nothing of a cache) the request's cache prefix (``cache_prefix``). As the client sent it —
what the request would have cost without ctxproxy — the forwarded cost itself when ctxproxy
forwarded the client's messages and tools as they came; else C is the prefix the client's prompt
shares with its own previous one (an estimate: a provider that caches every repeated prefix).
So a compaction that rewrites bytes the provider had cached shows as a cost: its prompt is
smaller but paid at full price, where the client's would have been read from the cache. Cache
writes (Anthropic bills them at 1.25×) are priced as input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from ctxproxy.compaction.windows import configured
from ctxproxy.config.models import DEFAULT_CACHE_DISCOUNT, TenantConfig

__all__ = ["Costs", "Prices", "PromptCost", "forwarded_cached"]


@dataclass(frozen=True)
class Prices:
    per_mtok: float | None  # USD per million full-price prompt tokens; None: not priced
    cached_per_mtok: float | None
    discount: float  # cached price / full price

    @classmethod
    def of(cls, tenant: TenantConfig, model: str | None) -> Prices:
        price = configured(model, tenant, lambda m: m.input_price_per_mtok)
        cached = configured(model, tenant, lambda m: m.cached_input_price_per_mtok)
        discount = configured(model, tenant, lambda m: m.cache_discount)
        full = None if price is None else price[0]
        if cached is not None and full and discount is None:
            return cls(full, cached[0], min(1.0, cached[0] / full))
        share = DEFAULT_CACHE_DISCOUNT if discount is None else discount[0]
        if cached is not None:
            return cls(full, cached[0], share)
        return cls(full, None if full is None else full * share, share)


class PromptCost(NamedTuple):
    tokens: int
    cached: int

    def billed(self, prices: Prices) -> float:
        """In full-price tokens."""
        return self.tokens - self.cached + prices.discount * self.cached

    def usd(self, prices: Prices) -> float | None:
        if prices.per_mtok is None or prices.cached_per_mtok is None:
            return None
        return ((self.tokens - self.cached) * prices.per_mtok + self.cached * prices.cached_per_mtok) / 1_000_000


def forwarded_cached(tokens: int, prefix: int, reported: tuple[int, int] | None) -> tuple[int, str]:
    """The forwarded prompt's cached tokens, and where the figure comes from: ``reported`` (the
    upstream's prompt count and cached count) as a share of ``tokens``, else the cache ``prefix``."""
    if reported is not None and reported[0] > 0:
        prompt, cached = reported
        return round(tokens * min(1.0, cached / prompt)), "upstream"
    return min(prefix, tokens), "prefix"


class Costs(NamedTuple):
    """A request's prompt priced both ways; ``fields()`` for its log line (and so its metrics and
    its session record)."""

    prices: Prices
    sent: PromptCost
    forwarded: PromptCost
    source: str  # of the forwarded cached figure: "upstream" or "prefix"

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cached_tokens": self.forwarded.cached,
            "cached_from": self.source,
            "billed_before": round(self.sent.billed(self.prices)),
            "billed_after": round(self.forwarded.billed(self.prices)),
        }
        before, after = self.sent.usd(self.prices), self.forwarded.usd(self.prices)
        if before is not None and after is not None:
            out |= {"usd_before": before, "usd_after": after}
        return out

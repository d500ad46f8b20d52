"""A tenant's traffic in time buckets (``store.keys.tenant_stats_key``): requests, prompt tokens
as sent and as forwarded, compactions and retries per ``BUCKET_SECONDS``, kept ``KEEP_SECONDS``;
and what the prompts cost with the provider's prompt cache, as sent and as forwarded, in
full-price tokens (``billed_*``) and, for priced models, in billionths of a dollar (``nano_usd_*``).
Prompt tokens and costs count only for requests that reached the upstream, as
``ctxproxy_prompt_tokens`` counts them: one ctxproxy answered with an error of its own (the
upstream down, a timeout) is a request, and forwarded nothing. Pure: ``added`` is the update
``Store.update_many`` applies; ``totals`` sums buckets read back."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from ctxproxy.session.records import Observation

BUCKET_SECONDS: Final = 300
KEEP_SECONDS: Final = 2 * 86400
FIELDS: Final = (
    "requests",
    "before",
    "after",
    "compactions",
    "retries",
    "billed_before",
    "billed_after",
    "nano_usd_before",
    "nano_usd_after",
)


def bucket_of(at: float) -> int:
    """The start (unix seconds) of the bucket holding time ``at``."""
    return int(at // BUCKET_SECONDS) * BUCKET_SECONDS


@dataclass(frozen=True)
class Totals:
    requests: int = 0
    before: int = 0
    after: int = 0
    compactions: int = 0
    retries: int = 0
    billed_before: int = 0
    billed_after: int = 0
    nano_usd_before: int = 0
    nano_usd_after: int = 0

    @classmethod
    def of(cls, seen: Observation) -> Totals:
        if not seen.reached_upstream:
            return cls(1, 0, 0, int(seen.compacted), int(seen.retried))
        after = seen.tokens if seen.forwarded is None else seen.forwarded  # as ``Observation.entry`` says
        billed = seen.billed or (0, 0)
        usd = seen.nano_usd or (0, 0)
        return cls(1, seen.tokens, after, int(seen.compacted), int(seen.retried), *billed, *usd)

    def __add__(self, other: Totals) -> Totals:
        # Field by field, in ``FIELDS`` order (a test checks they agree): one a request, on its path.
        return Totals(
            self.requests + other.requests,
            self.before + other.before,
            self.after + other.after,
            self.compactions + other.compactions,
            self.retries + other.retries,
            self.billed_before + other.billed_before,
            self.billed_after + other.billed_after,
            self.nano_usd_before + other.nano_usd_before,
            self.nano_usd_after + other.nano_usd_after,
        )

    @property
    def saved_percent(self) -> float:
        """How much smaller the forwarded prompts were than the clients' (0 without traffic)."""
        return 100.0 * (self.before - self.after) / self.before if self.before > 0 else 0.0

    @property
    def cost_saved_percent(self) -> float:
        """How much less the forwarded prompts cost than the clients' would have, with the
        provider's prompt cache: negative when compaction broke the cache more than it saved."""
        return 100.0 * (self.billed_before - self.billed_after) / self.billed_before if self.billed_before else 0.0

    @property
    def saved_usd(self) -> float:
        return (self.nano_usd_before - self.nano_usd_after) / 1e9

    def to_json(self) -> dict[str, int]:
        return {f: getattr(self, f) for f in FIELDS}


def decode(value: Any) -> Totals:
    """A stored bucket; a malformed one (or a malformed field) counts as nothing."""
    if not isinstance(value, dict):
        return Totals()
    numbers = {f: value.get(f) for f in FIELDS}
    return Totals(
        **{f: v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0 for f, v in numbers.items()}
    )


def added(value: Any, more: Totals) -> dict[str, int]:
    """The stored bucket with ``more`` counted in."""
    return (decode(value) + more).to_json()


def totals(buckets: Iterable[tuple[int, Any]], since: float) -> Totals:
    """The sum of the buckets (start, stored value) that start at or after ``since``."""
    out = Totals()
    for start, value in buckets:
        if start >= since:
            out += decode(value)
    return out

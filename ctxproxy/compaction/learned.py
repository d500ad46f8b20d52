"""What ctxproxy has learned about one tenant's model: its real window and how it counts. Pure.

Two facts, each with the time it was learned (``ctxproxy.compaction.learning`` keeps them in the
Store, per tenant and model, so every replica and every later session uses them):

* **window**, in the upstream's tokens: the limit an overflow error stated; or, when it stated
  none, :data:`~ctxproxy.compaction.retry_budget.SHRINK` of what it refused; or what a server that
  truncates silently kept of a prompt. Never above the configured window, only ever lowered.
* **ratio**: how many tokens the upstream counts per ctxproxy token, a running mean of samples
  (an overflow error's stated prompt size, or ``usage.prompt_tokens`` of an answer, over
  ctxproxy's count of what it sent), with a running mean deviation (``spread``). Pre-flight divides
  the room by ``ratio + 2 * spread``, so a model that counts 25 % more never overflows, and one
  that counts less gets its whole window. Until a ratio is learned, pre-flight divides by the
  protocol's prior (``preflight_window``'s ``prior``: 1.2 for Claude, none for OpenAI chat), so
  a model known to count more does not overflow once first; the first learned ratio replaces it.

Samples ctxproxy cannot trust are ignored: prompts under :data:`MIN_SAMPLE_TOKENS` (per-message
overheads dominate), ratios outside :data:`~ctxproxy.compaction.retry_budget.RATIO_BOUNDS`, and,
once :data:`SETTLED` samples agree, one more than :data:`OUTLIER` away from their mean (cached-token
accounting, a tool definition counted differently). An answer whose ``usage.prompt_tokens`` is far
below what was sent (:func:`is_truncation`) is a silent truncation: it teaches the window instead.

Both facts are forgotten after the tenant's ``learned_window_days`` and when what they were
learned under changes (the configured window or the upstream's URL: ``basis``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from typing import Any

from ctxproxy.compaction.retry_budget import MARGIN, RATIO_BOUNDS, SHRINK
from ctxproxy.strategies.base import Window

__all__ = ["Learned", "Sample", "preflight_window"]

MIN_SAMPLE_TOKENS = 256  # below this, fixed per-message overheads make the ratio meaningless
WEIGHT = 0.2  # of a new sample in the running mean
SETTLED = 3  # samples after which one far from the mean is an outlier
OUTLIER = 0.5  # relative distance from the mean beyond which a settled ratio ignores a sample
TRUNCATION_FLOOR = 1024  # the least window a silent truncation teaches (usage can be misreported)
TRUNCATED = 0.7  # usage below this share of what was expected: the upstream dropped part of the prompt


@dataclass(frozen=True)
class Sample:
    """One prompt, counted by both sides: ``ours`` (ctxproxy, what it sent) and ``upstream``."""

    ours: int
    upstream: int

    @property
    def ratio(self) -> float:
        """A division at each read: cheaper than ``cached_property``'s first read (its lock)."""
        return self.upstream / self.ours


@dataclass(frozen=True)
class Learned:
    model: str  # as the client named it (shown by the admin API and ``config check``)
    basis: str  # what it was learned under: changes of the configured window or upstream forget it
    window: int | None = None  # the upstream's real window, in its tokens
    window_at: float | None = None
    window_source: str | None = None  # "overflow", "overflow_without_numbers", "silent_truncation"
    ratio: float | None = None  # upstream tokens per ctxproxy token, running mean
    spread: float = 0.0  # running mean absolute deviation of the samples from ``ratio``
    samples: int = 0
    ratio_at: float | None = None
    truncation_logged: bool = False

    # -- reading and writing the stored form ----------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(value: object) -> Learned | None:
        """The stored record, or None when it is not one (an older or damaged value)."""
        if not isinstance(value, Mapping):
            return None
        try:
            learned = Learned(**{key: value[key] for key in Learned.__dataclass_fields__ if key in value})
        except TypeError:
            return None
        return learned if learned.valid() else None

    def valid(self) -> bool:
        numbers_ok = all(
            v is None or (isinstance(v, int | float) and not isinstance(v, bool) and v >= 0)
            for v in (self.window, self.window_at, self.ratio, self.ratio_at)
        )
        return (
            isinstance(self.model, str)
            and isinstance(self.basis, str)
            and numbers_ok
            and isinstance(self.spread, int | float)
            and isinstance(self.samples, int)
        )

    # -- what is still true -----------------------------------------------------------------------

    def current(self, basis: str, now: float, ttl: float) -> Learned | None:
        """What of this record still holds: nothing under another basis; each fact until ``ttl``
        seconds after it was learned."""
        if basis != self.basis:
            return None
        fresh = self
        if self.window_at is not None and now - self.window_at > ttl:
            fresh = replace(fresh, window=None, window_at=None, window_source=None)
        if self.ratio_at is not None and now - self.ratio_at > ttl:
            fresh = replace(fresh, ratio=None, spread=0.0, samples=0, ratio_at=None)
        return None if fresh.window is None and fresh.ratio is None else fresh

    @cached_property
    def applied_ratio(self) -> float | None:
        """The ratio pre-flight divides by: the mean plus twice the spread, within bounds. A ratio
        below 1 (the upstream counts less: more fits) is used only once :data:`SETTLED` samples
        agree on it; one above 1 (less fits) at once. Made once per record (a request reads it
        several times)."""
        if self.ratio is None:
            return None
        low, high = RATIO_BOUNDS
        applied = min(high, max(low, self.ratio + 2 * self.spread))
        return applied if applied >= 1.0 or self.samples >= SETTLED else 1.0

    # -- learning ---------------------------------------------------------------------------------

    def with_window(self, tokens: int, configured: int, source: str, now: float) -> Learned:
        """The window lowered to ``tokens`` (never raised, never above ``configured``)."""
        tokens = max(1, min(tokens, configured))
        if self.window is not None and self.window <= tokens:
            return self
        return replace(self, window=tokens, window_at=now, window_source=source)

    def with_sample(self, sample: Sample, now: float) -> Learned:
        """The ratio moved towards one more trusted sample; unchanged for one it cannot trust."""
        if not self.trusts(sample):
            return self
        if self.ratio is None:
            return self.with_ratio(sample.ratio, 0.0, 1, now)
        mean = self.ratio + WEIGHT * (sample.ratio - self.ratio)
        spread = self.spread + WEIGHT * (abs(sample.ratio - mean) - self.spread)
        return self.with_ratio(mean, spread, self.samples + 1, now)

    def with_ratio(self, ratio: float, spread: float, samples: int, at: float) -> Learned:
        """``replace(self, ratio=…, spread=…, samples=…, ratio_at=at)``, made directly: it runs at
        every answer that reports usage (a test checks they agree)."""
        window, window_at, source = self.window, self.window_at, self.window_source
        return Learned(
            self.model, self.basis, window, window_at, source, ratio, spread, samples, at, self.truncation_logged
        )

    def trusts(self, sample: Sample) -> bool:
        if sample.ours < MIN_SAMPLE_TOKENS:
            return False
        low, high = RATIO_BOUNDS
        if not low <= sample.ratio <= high:
            return False
        if self.ratio is not None and self.samples >= SETTLED:
            return abs(sample.ratio - self.ratio) <= OUTLIER * self.ratio
        return True

    def is_truncation(self, sample: Sample) -> bool:
        """``usage.prompt_tokens`` far below what was sent, beyond what the ratio explains: the
        upstream dropped part of the prompt without saying so."""
        if sample.ours < MIN_SAMPLE_TOKENS:
            return False
        expected = self.ratio if self.ratio is not None and self.samples >= SETTLED else 1.0
        return sample.ratio < TRUNCATED * expected


def overflow_learned(
    learned: Learned, limit: int | None, prompt: int | None, sent: int, answer: int, configured: int, now: float
) -> Learned:
    """What an overflow error teaches: its stated prompt size gives a ratio sample; its stated
    limit is the window. Without a limit, the window is taken as :data:`SHRINK` of what was
    refused (the upstream's tokens: ours times the ratio known so far) plus the answer."""
    if prompt is not None and sent > 0:
        learned = learned.with_sample(Sample(sent, prompt), now)
    if limit is not None:
        return learned.with_window(limit, configured, "overflow", now)
    refused = sent * (learned.applied_ratio or 1.0)
    return learned.with_window(int(refused * SHRINK) + answer, configured, "overflow_without_numbers", now)


def usage_learned(
    learned: Learned, sample: Sample, configured: int, now: float, truncated: bool | None = None
) -> Learned:
    """What an answer's ``usage.prompt_tokens`` teaches: a ratio sample, or, when it is a silent
    truncation, the window (what the upstream kept, at least :data:`TRUNCATION_FLOOR`: a usage
    figure is a weaker witness than an error's stated limit). ``truncated``: what
    ``learned.is_truncation(sample)`` says, when the caller asked it already."""
    if learned.is_truncation(sample) if truncated is None else truncated:
        kept = max(sample.upstream, TRUNCATION_FLOOR)
        return learned.with_window(kept, configured, "silent_truncation", now)
    return learned.with_sample(sample, now)


def preflight_window(window: Window, learned: Learned | None, prior: float | None = None) -> Window:
    """The window pre-flight compacts to, in ctxproxy's tokens: the learned window (or the
    configured one) less the answer and, for a learned window, a :data:`MARGIN`, divided by the
    ratio; the answer's reserve stays as it was. The ratio is the learned one once there is one;
    before, ``prior``: what the protocol knows of how its models count
    (``WireAdapter.count_ratio``; Anthropic's is ``wire.anthropic.count.CALIBRATION``), else 1."""
    learned_window = None if learned is None else learned.window
    ratio = learned.applied_ratio if learned is not None and learned.applied_ratio is not None else prior
    if learned_window is None and ratio is None:
        return window
    limit = window.context_window if learned_window is None else min(learned_window, window.context_window)
    margin = MARGIN * limit if learned_window is not None else 0.0
    room = max(0.0, (limit - window.reserve_output - margin) / (ratio or 1.0))
    return Window(int(room) + window.reserve_output, window.reserve_output)

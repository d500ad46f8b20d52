"""What one overflow or answer teaches about a model's window and counting (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.compaction.learned import (
    MIN_SAMPLE_TOKENS,
    SETTLED,
    Learned,
    Sample,
    overflow_learned,
    preflight_window,
    usage_learned,
)
from ctxproxy.compaction.retry_budget import MARGIN, SHRINK
from ctxproxy.strategies.base import Window

NOW = 1_800_000_000.0
DAY = 86_400.0
BLANK = Learned("m", "basis")


def settled(ratio: float, n: int = SETTLED) -> Learned:
    learned = BLANK
    for _ in range(n):
        learned = learned.with_sample(Sample(1000, round(1000 * ratio)), NOW)
    return learned


def test_a_stated_limit_and_prompt_teach_window_and_ratio() -> None:
    learned = overflow_learned(BLANK, 6000, 15_000, 12_000, 0, 1_000_000, NOW)
    assert learned.window == 6000 and learned.window_source == "overflow" and learned.window_at == NOW
    assert learned.ratio == pytest.approx(1.25) and learned.samples == 1


def test_a_learned_window_never_exceeds_the_configured_one_and_only_falls() -> None:
    assert overflow_learned(BLANK, 200_000, None, 150_000, 0, 128_000, NOW).window == 128_000
    low = BLANK.with_window(5000, 128_000, "overflow", NOW)
    assert low.with_window(7000, 128_000, "overflow", NOW + 1) is low
    lower = low.with_window(4000, 128_000, "overflow", NOW + 1)
    assert lower.window == 4000 and lower.window_at == NOW + 1


def test_an_error_without_numbers_learns_a_shrunk_window() -> None:
    learned = overflow_learned(BLANK, None, None, 10_000, 500, 1_000_000, NOW)
    assert learned.window == int(10_000 * SHRINK) + 500
    assert learned.window_source == "overflow_without_numbers" and learned.ratio is None


@pytest.mark.parametrize(
    ("ours", "upstream"),
    [
        (MIN_SAMPLE_TOKENS - 1, 400),  # too small: per-message overheads dominate
        (1000, 3500),  # above the bounds: a wrong number
    ],
)
def test_untrusted_samples_teach_nothing(ours: int, upstream: int) -> None:
    assert BLANK.with_sample(Sample(ours, upstream), NOW) == BLANK


def test_once_settled_an_outlier_is_ignored_but_agreeing_samples_move_the_mean() -> None:
    learned = settled(1.2)
    assert learned.with_sample(Sample(1000, 2500), NOW) == learned  # 2.5: more than 50 % off
    moved = learned.with_sample(Sample(1000, 1300), NOW)
    assert learned.ratio is not None and moved.ratio is not None
    assert learned.ratio < moved.ratio < 1.3 and moved.samples == learned.samples + 1 and moved.spread > 0


def test_the_applied_ratio_adds_the_spread_and_trusts_a_low_ratio_only_when_settled() -> None:
    assert BLANK.with_sample(Sample(1000, 800), NOW).applied_ratio == 1.0  # one sample: not trusted yet
    assert settled(0.8).applied_ratio == pytest.approx(0.8)
    assert BLANK.with_sample(Sample(1000, 1300), NOW).applied_ratio == pytest.approx(1.3)  # more: at once
    noisy = settled(1.2).with_sample(Sample(1000, 1400), NOW)
    assert noisy.ratio is not None and noisy.applied_ratio == pytest.approx(noisy.ratio + 2 * noisy.spread)


def test_silent_truncation_is_usage_far_below_what_was_sent() -> None:
    truncated = usage_learned(BLANK, Sample(3400, 1500), 100_000, NOW)
    assert truncated.window == 1500 and truncated.window_source == "silent_truncation"
    assert truncated.ratio is None  # a truncated count says nothing of the ratio
    # A usage figure is a weak witness: it never teaches a window below 1,024 tokens.
    assert usage_learned(BLANK, Sample(3400, 100), 100_000, NOW).window == 1024
    # A model that counts 40 % less, once that is known, is no truncation.
    low = settled(0.6, 5)
    assert not low.is_truncation(Sample(3400, 2000)) and low.is_truncation(Sample(3400, 1000))


def test_preflight_divides_the_room_by_the_ratio_and_keeps_a_margin_under_a_learned_window() -> None:
    window = Window(1_000_000, 300)
    assert preflight_window(window, None) == window
    learned = overflow_learned(BLANK, 6000, 7500, 6000, 300, 1_000_000, NOW)  # ratio 1.25
    fitted = preflight_window(window, learned)
    assert fitted.reserve_output == 300
    assert fitted.budget == int((6000 - 300 - MARGIN * 6000) / 1.25)
    calibrated = preflight_window(Window(8000), BLANK.with_sample(Sample(1000, 1300), NOW))
    assert calibrated.budget == int(8000 / 1.3)  # the configured window: no margin


def test_a_protocols_prior_ratio_applies_until_a_ratio_is_learned() -> None:
    window = Window(10_000, 400)
    assert preflight_window(window, None, None) == window
    prior = preflight_window(window, None, 1.2)
    assert prior.reserve_output == 400 and prior.budget == int((10_000 - 400) / 1.2)
    # A learned window without a ratio: the window (and its margin) with the prior's ratio.
    lowered = BLANK.with_window(8000, 10_000, "overflow", NOW)
    assert preflight_window(window, lowered, 1.2).budget == int((8000 - 400 - MARGIN * 8000) / 1.2)
    # A learned ratio wins over the prior, above it or below it.
    assert preflight_window(window, BLANK.with_sample(Sample(1000, 1500), NOW), 1.2).budget == int(9600 / 1.5)
    assert preflight_window(window, settled(0.8), 1.2).budget == int(9600 / 0.8)
    # One low sample is not trusted yet (applied as 1), and still replaces the prior.
    assert preflight_window(window, BLANK.with_sample(Sample(1000, 900), NOW), 1.2).budget == 9600


def test_facts_are_forgotten_after_the_ttl_or_under_another_basis() -> None:
    learned = overflow_learned(BLANK, 6000, 7500, 6000, 0, 1_000_000, NOW)
    assert learned.current("basis", NOW + 6 * DAY, 7 * DAY) == learned
    assert learned.current("other", NOW, 7 * DAY) is None
    assert learned.current("basis", NOW + 8 * DAY, 7 * DAY) is None
    newer_ratio = learned.with_sample(Sample(1000, 1250), NOW + 5 * DAY)
    kept = newer_ratio.current("basis", NOW + 8 * DAY, 7 * DAY)
    assert kept is not None and kept.window is None and kept.ratio is not None


@pytest.mark.parametrize(
    "value",
    [None, [], "x", {"model": "m"}, {"model": 3, "basis": "b"}, {"model": "m", "basis": "b", "window": -5}],
)
def test_damaged_records_read_as_nothing(value: object) -> None:
    assert Learned.from_json(value) is None


def test_records_round_trip_through_json() -> None:
    learned = overflow_learned(BLANK, 6000, 7500, 6000, 0, 1_000_000, NOW)
    assert Learned.from_json(learned.to_json()) == learned


_MAYBE_TIME = st.none() | st.floats(0, 2e9)


_LEARNED = st.builds(
    Learned,
    st.text(max_size=5),
    st.text(max_size=5),
    st.none() | st.integers(1, 2**20),
    _MAYBE_TIME,
    st.none() | st.sampled_from(["overflow", "silent_truncation"]),
    st.none() | st.floats(0.1, 10),
    st.floats(0, 1),
    st.integers(0, 100),
    _MAYBE_TIME,
    st.booleans(),
)


@given(_LEARNED, st.integers(1, 2**20), st.integers(0, 2**21), st.integers(1, 2**20), st.floats(0, 2e9))
def test_a_truncation_asked_already_teaches_what_asking_it_again_does(
    learned: Learned, ours: int, upstream: int, configured: int, now: float
) -> None:
    sample = Sample(ours, upstream)
    asked = usage_learned(learned, sample, configured, now, learned.is_truncation(sample))
    assert asked == usage_learned(learned, sample, configured, now)
    assert sample.ratio == upstream / ours  # read at each use, as it was made once


@given(
    _LEARNED,
    st.floats(0.1, 10),
    st.floats(0, 1),
    st.integers(0, 100),
    st.floats(0, 2e9),
)
def test_a_new_ratio_replaces_only_the_ratio(learned: Learned, ratio: float, spread: float, n: int, at: float) -> None:
    assert learned.with_ratio(ratio, spread, n, at) == replace(
        learned, ratio=ratio, spread=spread, samples=n, ratio_at=at
    )

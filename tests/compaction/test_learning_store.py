"""What is learned is kept in a real Store, shared by replicas, forgotten after its days or when
the configuration it was learned under changes, and never fails a request when the Store does."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxproxy.cache import ByteLRU
from ctxproxy.compaction.learned import Learned, Sample, usage_learned
from ctxproxy.compaction.learning import MODEL_CHARS, NAMES, REFRESH, UNREAD, WindowLearning
from ctxproxy.config.models import ModelConfig, TenantConfig, UpstreamConfig
from ctxproxy.store import DiskStore
from ctxproxy.upstream.overflow_numbers import OverflowNumbers
from tests.conftest import write_config

DAY = 86_400.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[DiskStore]:
    store = DiskStore(tmp_path / "data")
    yield store
    await store.close()


def tenant(days: float = 7.0, base_url: str = "http://upstream.test/v1") -> TenantConfig:
    return TenantConfig(name="acme", upstream=UpstreamConfig(base_url=base_url, learned_window_days=days))


def replica(store: DiskStore, clock: Clock) -> WindowLearning:
    return WindowLearning(store, ByteLRU(1 << 20), clock)


async def test_a_window_learned_by_one_replica_is_used_by_another(store: DiskStore) -> None:
    clock = Clock()
    one, two = replica(store, clock), replica(store, clock)
    acme = tenant()  # no [models]: the default window, 128,000
    assert await two.current(acme, "m", 128_000) is None
    await one.overflow(acme, "m", 128_000, OverflowNumbers(limit=6000, prompt=15_000), 12_000, 0)
    assert (await one.current(acme, "m", 128_000)).window == 6000  # type: ignore[union-attr]
    clock.now += REFRESH + 0.1  # the other replica reads the Store again
    learned = await two.current(acme, "m", 128_000)
    assert learned is not None and learned.window == 6000 and learned.ratio == pytest.approx(1.25)
    assert await two.current(acme, "other-model", 128_000) is None
    [row] = await two.report(acme)
    assert row["model"] == "m" and row["learned_window"] == 6000 and row["configured_window"] == 128_000


async def test_forgotten_after_its_days_and_when_the_config_changes(store: DiskStore) -> None:
    clock = Clock()
    learning = replica(store, clock)
    acme = tenant(days=2)
    await learning.overflow(acme, "m", 1_000_000, OverflowNumbers(limit=6000), 9000, 0)
    assert await learning.current(acme, "m", 1_000_000) is not None
    assert await learning.current(acme, "m", 500_000) is None  # the configured window changed
    assert await learning.current(tenant(days=2, base_url="http://elsewhere.test/v1"), "m", 1_000_000) is None
    clock.now += 2 * DAY + 1
    assert await learning.current(acme, "m", 1_000_000) is None


async def test_zero_days_never_learns(store: DiskStore) -> None:
    learning = replica(store, Clock())
    off = tenant(days=0)
    await learning.overflow(off, "m", 1_000_000, OverflowNumbers(limit=6000), 9000, 0)
    await learning.usage(off, "m", 1_000_000, Sample(1000, 1300))
    assert await learning.current(off, "m", 1_000_000) is None
    assert await store.keys("ctx:") == []


async def test_samples_that_barely_move_the_ratio_stay_in_the_replica(store: DiskStore) -> None:
    clock = Clock()
    learning = replica(store, clock)
    acme = tenant()
    await learning.usage(acme, "m", 8000, Sample(1000, 1300))
    [key] = await store.keys("ctx:acme:window:")
    written = await store.get(key)
    await learning.usage(acme, "m", 8000, Sample(1000, 1301))
    assert await store.get(key) == written
    local = await learning.current(acme, "m", 8000)
    assert local is not None and local.samples == 2
    await learning.usage(acme, "m", 8000, Sample(1000, 1600))  # moves it: written
    assert await store.get(key) != written


async def test_a_failing_store_costs_the_learning_never_the_request(tmp_path: Path) -> None:
    store = DiskStore(tmp_path / "data")
    learning = replica(store, Clock())
    await store.close()
    acme = tenant()
    with structlog.testing.capture_logs() as logs:
        await learning.overflow(acme, "m", 1_000_000, OverflowNumbers(limit=6000), 9000, 0)
        learned = await learning.current(acme, "m", 1_000_000)
    assert learned is not None and learned.window == 6000  # this replica still knows
    assert any(e["event"] == "window.learning_failed" for e in logs)


def test_config_check_shows_configured_and_learned_windows(tmp_path: Path) -> None:
    data = tmp_path / "data"
    config = write_config(
        tmp_path / "config",
        {"acme": '[upstream]\nbase_url = "http://upstream.test/v1"\n[models."m-*"]\ncontext_window = 1000000\n'},
        f'[store]\npath = "{data}"\n',
    )
    check = [sys.executable, "-m", "ctxproxy", "config", "check", "--config", str(config)]
    assert "learned" not in subprocess.run(check, capture_output=True, text=True, check=True).stdout  # no store yet

    async def learn() -> None:
        store = DiskStore(data)
        try:
            acme = TenantConfig(
                name="acme",
                upstream=UpstreamConfig(base_url="http://upstream.test/v1"),
                models={"m-*": ModelConfig(context_window=1_000_000)},
            )
            learning = WindowLearning(store, ByteLRU(1 << 20))
            numbers = OverflowNumbers(limit=6000, prompt=15_000)
            await learning.overflow(acme, "m-small", 1_000_000, numbers, 12_000, 0)
        finally:
            await store.close()

    asyncio.run(learn())
    out = subprocess.run(check, capture_output=True, text=True, check=True).stdout
    assert "acme m-small: configured 1000000, learned 6000 (overflow," in out
    assert "count ratio 1.25 (1 samples)" in out


async def test_a_record_read_after_many_models_is_the_one_each_model_wrote(store: DiskStore) -> None:
    """A replica keeps the hashed names of its records for ``NAMES`` models, then hashes anew:
    past that (and for a name too long to keep) each model still reads its own record, and a
    changed upstream still forgets it."""
    clock = Clock()
    one = replica(store, clock)
    acme = tenant()
    models = [f"model-{i}" for i in range(NAMES + 10)] + ["x" * (MODEL_CHARS + 1)]
    for i, model in enumerate(models):
        await one.overflow(acme, model, 128_000, OverflowNumbers(limit=1000 + i, prompt=None), 12_000, 0)
    for i, model in enumerate(models):
        assert (await one.current(acme, model, 128_000)).window == 1000 + i  # type: ignore[union-attr]
    assert await one.current(tenant(base_url="http://elsewhere.test/v1"), models[0], 128_000) is None


async def _usage_as_before(learning: WindowLearning, acme: TenantConfig, sample: Sample) -> None:
    """``usage`` as it was: ``current`` for the check, then ``_learn``, which looks the record up again."""
    known = await learning.current(acme, "m", 8000) or Learned("m", "")
    if known.is_truncation(sample) and not known.truncation_logged:
        structlog.get_logger("test").warning("upstream.silent_truncation")

    def learn(rec: Learned) -> Learned:
        learned = usage_learned(rec, sample, 8000, learning._clock())
        return replace(learned, truncation_logged=True) if rec.is_truncation(sample) else learned

    await learning._learn(acme, "m", 8000, learn)


@given(
    samples=st.lists(
        st.tuples(
            st.integers(1, 40_000),
            st.sampled_from([0.1, 0.6, 0.9, 1.0, 1.3, 2.0]),
            st.sampled_from([0, 1, REFRESH + 1]),
        ),
        min_size=1,
        max_size=12,
    ),
    days=st.sampled_from([0.0, 7.0]),
)
@settings(max_examples=40, deadline=None)
def test_usage_learns_and_warns_as_reading_the_record_then_learning_did(
    tmp_path_factory: pytest.TempPathFactory, samples: list[tuple[int, float, float]], days: float
) -> None:
    """``usage`` looks its record up once for the silent-truncation check and the learning (it
    was twice): for random samples (truncations, samples kept local, refreshes from the Store),
    its warnings, the records it holds and what it writes are those of the former two lookups."""

    async def run() -> None:
        stores = [DiskStore(tmp_path_factory.mktemp("learn") / "data") for _ in range(2)]
        clock, acme = Clock(), tenant(days=days)
        now, before = replica(stores[0], clock), replica(stores[1], clock)
        try:
            for ours, ratio, later in samples:  # the upstream's count is ``ratio`` times ours: < 0.7 is a truncation
                clock.now += later
                upstream = max(1, round(ours * ratio))
                with structlog.testing.capture_logs() as logs:
                    await now.usage(acme, "m", 8000, Sample(ours, upstream))
                with structlog.testing.capture_logs() as logs_before:
                    await _usage_as_before(before, acme, Sample(ours, upstream))
                assert [e["event"] for e in logs] == [e["event"] for e in logs_before]
                assert await now.current(acme, "m", 8000) == await before.current(acme, "m", 8000)
                keys = await stores[0].keys("ctx:")
                assert keys == await stores[1].keys("ctx:")
                assert [await stores[0].get(k) for k in keys] == [await stores[1].get(k) for k in keys]
        finally:
            for store in stores:
                await store.close()

    asyncio.run(run())


async def test_held_answers_as_current_while_the_copy_is_fresh(store: DiskStore) -> None:
    """``held`` (no coroutine) gives what ``current`` gives while this replica's copy is fresh,
    and ``UNREAD`` when it is not (then ``current`` reads the Store, as before)."""
    clock = Clock()
    learning, other = replica(store, clock), replica(store, clock)
    assert learning.held(tenant(), "m", 100_000) is UNREAD  # nothing read yet
    assert await learning.current(tenant(), "m", 100_000) is None
    assert learning.held(tenant(), "m", 100_000) is None  # read: nothing learned
    for n in range(5):
        await learning.usage(tenant(), "m", 100_000, Sample(1_000, 1_200 + 10 * n))
        assert learning.held(tenant(), "m", 100_000) == await learning.current(tenant(), "m", 100_000)
    assert learning.held(tenant(), "m", 100_000) is not None
    await other.overflow(tenant(), "m", 100_000, OverflowNumbers(limit=50_000, prompt=None), 60_000, 1_000)
    clock.now += REFRESH  # the copy is stale: the Store has what the other replica learned
    assert learning.held(tenant(), "m", 100_000) is UNREAD
    learned = await learning.current(tenant(), "m", 100_000)
    assert learned is not None and learned.window == 50_000
    assert learning.held(tenant(), "m", 100_000) == learned
    assert learning.held(tenant(days=0), "m", 100_000) is None  # learning off

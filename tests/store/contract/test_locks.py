"""Store contract: ``lock`` is a lease. One owner at a time; it ends by release or by expiry ``ttl``
after it was acquired or last renewed; a late release or renewal never touches a new owner's lease;
each acquisition gets a larger fencing token than every one before it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from ctxproxy.store import LockTimeout, Store, StoreError
from ctxproxy.store.lease import renewed


async def test_a_second_acquire_fails_while_held_and_succeeds_after_release(store: Store) -> None:
    first, second = store.lock("s", ttl=30), store.lock("s", ttl=30)
    assert await first.acquire(blocking=False) is True
    assert first.held
    assert await second.acquire(blocking=False) is False
    assert not second.held
    await first.release()
    assert not first.held
    assert await second.acquire(blocking=False) is True
    await second.release()


async def test_a_lock_held_through_one_instance_holds_for_another(stores: Callable[[], Store]) -> None:
    first, second = stores(), stores()
    holder = first.lock("s", ttl=30)
    assert await holder.acquire(blocking=False)
    assert await second.lock("s", ttl=30).acquire(blocking=False) is False
    await holder.release()
    taker = second.lock("s", ttl=30)
    assert await taker.acquire(blocking=False) is True
    assert await first.lock("s", ttl=30).acquire(blocking=False) is False
    await taker.release()


async def test_locks_on_different_names_are_independent(store: Store) -> None:
    a, b = store.lock("a", ttl=30), store.lock("b", ttl=30)
    assert await a.acquire(blocking=False)
    assert await b.acquire(blocking=False)
    await a.release()
    await b.release()


async def test_a_lock_is_apart_from_the_value_under_its_name(store: Store) -> None:
    await store.put("s", {"data": 1})
    lock = store.lock("s", ttl=30)
    assert await lock.acquire(blocking=False)
    assert await store.get("s") == {"data": 1}
    assert await store.keys("") == ["s"]
    await lock.release()
    assert await store.get("s") == {"data": 1}


async def test_an_unreleased_lock_expires_after_its_ttl(store: Store) -> None:
    crashed = store.lock("s", ttl=0.2)
    started = time.monotonic()
    assert await crashed.acquire(blocking=False)
    assert await store.lock("s", ttl=30).acquire(blocking=False) is False
    taker = store.lock("s", ttl=30)
    assert await taker.acquire(blocking=True, timeout=5) is True
    assert time.monotonic() - started >= 0.15
    assert not crashed.held
    await taker.release()


async def test_a_release_after_expiry_leaves_the_new_owners_lease_alone(store: Store) -> None:
    crashed = store.lock("s", ttl=0.2)
    assert await crashed.acquire(blocking=False)
    taker = store.lock("s", ttl=30)
    assert await taker.acquire(blocking=True, timeout=5)
    await crashed.release()  # its lease expired and was taken: must be a no-op
    assert await store.lock("s", ttl=30).acquire(blocking=False) is False
    assert taker.held
    await taker.release()
    assert await store.lock("s", ttl=30).acquire(blocking=False) is True


async def test_a_renewed_lease_outlives_its_ttl_and_an_unrenewed_one_expires_after_it(store: Store) -> None:
    lease = store.lock("s", ttl=0.6)
    assert await lease.acquire(blocking=False)
    async with renewed(lease):  # a heartbeat every 0.2 s
        deadline = time.monotonic() + 2.0  # more than three ttls
        while time.monotonic() < deadline:
            assert await store.lock("s", ttl=30).acquire(blocking=False) is False
            assert lease.held
    stopped = time.monotonic()  # no more renewals from here on
    taker = store.lock("s", ttl=30)
    assert await taker.acquire(blocking=True, timeout=5)
    waited = time.monotonic() - stopped
    assert 0.2 <= waited < 3  # the rest of the last renewal's 0.6 s, not the 30 s of a long lock
    assert await lease.renew() is False  # lost: someone else holds it now
    assert not lease.held
    await lease.release()  # a no-op: it is not ours any more
    assert taker.held
    await taker.release()


async def test_renewing_a_lock_that_is_not_held_fails(store: Store) -> None:
    lock = store.lock("s", ttl=30)
    assert await lock.renew() is False  # never acquired
    assert await lock.acquire(blocking=False)
    assert await lock.renew() is True
    await lock.release()
    assert await lock.renew() is False  # released
    assert not lock.held
    assert await store.lock("s", ttl=30).acquire(blocking=False) is True


async def test_a_blocking_acquire_gives_up_at_its_timeout(store: Store) -> None:
    holder = store.lock("s", ttl=30)
    assert await holder.acquire()
    started = time.monotonic()
    assert await store.lock("s", ttl=30).acquire(blocking=True, timeout=0.3) is False
    assert 0.29 <= time.monotonic() - started < 1.5
    await holder.release()


async def test_a_blocking_acquire_gets_the_lock_once_it_is_released(store: Store) -> None:
    holder = store.lock("s", ttl=30)
    assert await holder.acquire()

    async def work_then_release() -> None:
        await asyncio.sleep(0.1)  # the holder's work
        await holder.release()

    releaser = asyncio.create_task(work_then_release())
    waiter = store.lock("s", ttl=30)
    started = time.monotonic()
    assert await waiter.acquire(blocking=True, timeout=5) is True
    assert time.monotonic() - started < 1.0  # at the release, not at the 5 s timeout
    await releaser
    await waiter.release()


async def test_acquiring_a_lock_this_object_holds_is_a_programming_error(store: Store) -> None:
    lock = store.lock("s", ttl=30)
    assert await lock.acquire(blocking=False)
    with pytest.raises(RuntimeError, match="already held"):
        await lock.acquire(blocking=False)
    await lock.release()
    await lock.release()  # releasing twice is a no-op


async def test_async_with_acquires_and_releases_and_times_out_after_ttl(store: Store) -> None:
    async with store.lock("s", ttl=5) as lock:
        assert lock.held
        started = time.monotonic()
        with pytest.raises(LockTimeout, match="'s'") as caught:
            async with store.lock("s", ttl=0.2):
                pytest.fail("entered a lock that is held")
        assert time.monotonic() - started >= 0.19
        assert isinstance(caught.value, StoreError)
    assert not lock.held
    assert await store.lock("s", ttl=1).acquire(blocking=False) is True


async def test_async_with_releases_on_error(store: Store) -> None:
    with pytest.raises(KeyError):
        async with store.lock("s", ttl=30):
            raise KeyError("inside")
    assert await store.lock("s", ttl=30).acquire(blocking=False) is True


async def test_lock_objects_racing_for_one_lease_hold_it_one_at_a_time(store: Store) -> None:
    locks = [store.lock("s", ttl=5) for _ in range(8)]
    holders = 0
    most = 0

    async def take(lock_index: int) -> None:
        nonlocal holders, most
        lock = locks[lock_index]
        assert await lock.acquire(blocking=True, timeout=10)
        holders += 1
        most = max(most, holders)
        assert await lock.renew()
        holders -= 1
        await lock.release()

    await asyncio.gather(*(take(i) for i in range(len(locks))))
    assert most == 1


async def test_every_acquisition_gets_a_fencing_token_greater_than_every_earlier_one(
    stores: Callable[[], Store],
) -> None:
    first, second = stores(), stores()
    lock = first.lock("s", ttl=30)
    assert lock.fence is None  # never acquired
    assert await lock.acquire(blocking=False)
    fences = [lock.fence]
    assert await lock.renew()
    assert lock.fence == fences[0]  # a renewal is the same holding
    assert await second.lock("s", ttl=30).acquire(blocking=False) is False
    await lock.release()
    for store, name in ((second, "s"), (first, "other"), (second, "s"), (first, "s")):
        taker = store.lock(name, ttl=30)
        assert await taker.acquire(blocking=False)
        fences.append(taker.fence)
        await taker.release()
    assert all(isinstance(f, int) for f in fences)
    assert fences == sorted(set(fences))  # strictly increasing, across names and instances


async def test_a_holder_that_lost_its_lease_has_a_smaller_fence_than_the_one_that_took_it(store: Store) -> None:
    crashed = store.lock("s", ttl=0.2)
    assert await crashed.acquire(blocking=False)
    taker = store.lock("s", ttl=30)
    assert await taker.acquire(blocking=True, timeout=5)
    assert crashed.fence is not None and taker.fence is not None
    assert crashed.fence < taker.fence
    await taker.release()

"""``Deadline`` on a real event loop, with timeouts of a few tens of milliseconds: it expires once a
wait has lasted its seconds, counted from the newest activity, on one timer however much activity;
time nobody waits, or held back, is not counted."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

from ctxproxy.deadline import EARLY, Deadline

SECONDS = 0.05


class Expiries:
    """What a deadline's ``expire`` saw: when it was called, and an event to wait on."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.at: list[float] = []
        self.event = asyncio.Event()

    def __call__(self) -> None:
        self.at.append(self.loop.time())
        self.event.set()

    async def wait(self, longest: float = 1.0) -> float:
        await asyncio.wait_for(self.event.wait(), longest)
        return self.at[0]


def counting_timers(loop: asyncio.AbstractEventLoop, monkeypatch: Any, deadline: Deadline) -> list[float]:
    """The times of the timers ``deadline`` arms on ``loop`` from now on."""
    armed: list[float] = []
    call_at = loop.call_at

    def counted(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        if getattr(callback, "__self__", None) is deadline:
            armed.append(when)
        return call_at(when, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counted)
    return armed


async def test_expires_seconds_after_the_newest_activity() -> None:
    loop = asyncio.get_running_loop()
    expired = Expiries(loop)
    deadline = Deadline(loop, SECONDS, expired)
    deadline.note()
    for _ in range(4):  # activity every 20 ms: never a wait of 50 ms
        await asyncio.sleep(0.02)
        deadline.note()
        assert not expired.at
    last = deadline.since
    at = await expired.wait()
    assert at + EARLY >= last + SECONDS
    assert at < last + SECONDS + 0.5  # the loop's lag, generously
    await asyncio.sleep(SECONDS * 2)
    assert len(expired.at) == 1  # once: the timer is off after it expired


async def test_activity_while_armed_arms_nothing(monkeypatch: Any) -> None:
    loop = asyncio.get_running_loop()
    expired = Expiries(loop)
    deadline = Deadline(loop, SECONDS, expired)
    armed = counting_timers(loop, monkeypatch, deadline)
    deadline.note()
    for _ in range(100):
        deadline.note()
    assert len(armed) == 1
    await asyncio.sleep(SECONDS / 2)
    deadline.note()  # after the first arming: the fire re-arms it once for the rest
    await expired.wait()
    assert len(armed) == 2, armed
    assert armed[1] == deadline.since + SECONDS


async def test_a_stored_since_counts_as_activity() -> None:
    loop = asyncio.get_running_loop()
    expired = Expiries(loop)
    deadline = Deadline(loop, SECONDS, expired)
    deadline.note()
    await asyncio.sleep(0.03)
    deadline.since = loop.time()  # the hot path's note: no call, the timer already armed
    at = await expired.wait()
    assert at + EARLY >= deadline.since + SECONDS


async def test_time_not_waiting_is_not_counted(monkeypatch: Any) -> None:
    loop = asyncio.get_running_loop()
    expired = Expiries(loop)
    deadline = Deadline(loop, SECONDS, expired)
    armed = counting_timers(loop, monkeypatch, deadline)
    deadline.note()
    deadline.waiting = False  # nobody waits on the peer: its silence is not its fault
    await asyncio.sleep(SECONDS * 3)
    assert not expired.at
    assert len(armed) >= 2  # the timer stayed on (each fire restarted the count)
    began = deadline.since = loop.time()  # a wait begins: two stores, no call
    deadline.waiting = True
    at = await expired.wait()
    assert at + EARLY >= began + SECONDS
    assert at < began + SECONDS * 2 + 0.5  # within one more fire, and the loop's lag


async def test_time_held_back_is_not_counted() -> None:
    loop = asyncio.get_running_loop()
    expired = Expiries(loop)
    held = [True]
    deadline = Deadline(loop, SECONDS, expired, held=lambda: held[0])
    deadline.note()
    await asyncio.sleep(SECONDS * 3)  # fires while held: the count restarts, nothing expires
    assert not expired.at
    released = loop.time()
    held[0] = False
    at = await expired.wait()
    assert at >= released  # never while held; at the latest one wait after the hold's last fire
    assert at < released + SECONDS + 0.5


async def test_stopped_it_never_expires_and_a_note_arms_it_again() -> None:
    loop = asyncio.get_running_loop()
    expired = Expiries(loop)
    deadline = Deadline(loop, SECONDS, expired)
    deadline.note()
    deadline.stop()
    deadline.stop()  # twice: nothing to cancel
    await asyncio.sleep(SECONDS * 2)
    assert not expired.at
    deadline.note()
    await expired.wait()
    assert len(expired.at) == 1


async def test_closed_it_lets_its_owner_go() -> None:
    """An owner's callbacks hold the owner, which holds the deadline: once closed, the owner is freed
    without the cycle collector (as a cancelled timer handle let it go)."""

    class Owner:
        def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
            self.paused = False
            self.deadline = Deadline(loop, SECONDS, self.expire, held=lambda: self.paused)

        def expire(self) -> None: ...

    loop = asyncio.get_running_loop()
    gc.disable()
    try:
        owner = Owner(loop)
        owner.deadline.note()
        gone = weakref.ref(owner)
        owner.deadline.close()
        del owner
        assert gone() is None
    finally:
        gc.enable()

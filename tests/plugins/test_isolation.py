"""Calling a plugin's code isolated (``ctxproxy.plugins.isolation``): answers come back, failures
come back as their type, and only the caller's own cancellation goes through."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ctxproxy.plugins.isolation import Failed, isolated


async def test_a_coroutine_and_a_plain_function_answer() -> None:
    async def coro(x: int) -> int:
        return x + 1

    def plain(x: int) -> tuple[int, bool]:
        return x * 2, threading.current_thread() is threading.main_thread()

    assert await isolated(coro, 1, timeout=1) == 2
    assert await isolated(plain, 4, timeout=1) == (8, False)  # in a worker thread


async def test_exceptions_become_their_type_name() -> None:
    async def raises() -> None:
        raise KeyError("a secret")

    async def own_timeout() -> None:
        raise TimeoutError("the plugin's own call timed out")

    async def cancels_itself() -> None:
        raise asyncio.CancelledError()

    assert await isolated(raises, timeout=1) == Failed("KeyError")
    assert await isolated(own_timeout, timeout=1) == Failed("TimeoutError")
    assert await isolated(cancels_itself, timeout=1) == Failed("CancelledError")


async def test_the_deadline() -> None:
    gate = asyncio.Event()

    async def waits() -> None:
        await gate.wait()

    never = threading.Event()

    def blocks() -> None:
        never.wait(5)

    assert await isolated(waits, timeout=0.05) == Failed("timeout")
    assert await isolated(blocks, timeout=0.05) == Failed("timeout")
    never.set()


async def test_the_callers_cancellation_goes_through() -> None:
    started = asyncio.Event()

    async def waits() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(isolated(waits, timeout=60))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

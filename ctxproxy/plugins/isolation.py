"""Calling a plugin's code so that nothing it does can fail the request: a deadline, and every
exception turned into a value the caller logs.

``isolated`` awaits a plugin's coroutine (or runs its plain function in a worker thread) for at
most ``timeout`` seconds. It returns the answer, or ``Failed`` with the exception's type name
(``"timeout"`` when the deadline passed). It raises only the caller's own cancellation: a
plugin raising ``CancelledError`` while nobody cancelled the caller has failed like any other.
A worker thread that overruns cannot be stopped; its answer is dropped when it comes.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TIMEOUT = "timeout"


@dataclass(frozen=True)
class Failed:
    """A plugin call that gave no answer: ``error`` is the exception's type name, or ``"timeout"``."""

    error: str


async def isolated(call: Callable[..., Any], *args: Any, timeout: float) -> Any:
    """``call(*args)``'s answer (awaited when it is a coroutine), or ``Failed``."""
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            if inspect.iscoroutinefunction(call):
                return await call(*args)
            answer = await asyncio.to_thread(call, *args)
            return await answer if inspect.isawaitable(answer) else answer
    except TimeoutError as exc:
        return Failed(TIMEOUT if deadline.expired() else type(exc).__name__)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        return Failed("CancelledError")
    except Exception as exc:
        return Failed(type(exc).__name__)

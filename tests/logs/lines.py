"""Capturing structlog's lines as the real processor chain sees them (bound contextvars merged)."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from structlog.typing import EventDict


def capture() -> Any:
    return structlog.testing.capture_logs(processors=[structlog.contextvars.merge_contextvars])


def named(logs: list[EventDict], event: str) -> list[EventDict]:
    return [line for line in logs if line["event"] == event]


async def request_lines(logs: list[EventDict], n: int) -> list[EventDict]:
    """The ``request`` lines, once ``n`` of them were written (each is written as its request ends,
    which may be just after the client read the answer)."""
    for _ in range(500):
        if len(named(logs, "request")) >= n:
            break
        await asyncio.sleep(0.01)
    return named(logs, "request")

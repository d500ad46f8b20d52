"""How ``DiskStore`` keeps values: JSON bytes (``ctxproxy.store.values``, never pickles), read back
through a ``diskcache.Disk`` that refuses anything else; how a diskcache failure is described."""

from __future__ import annotations

from typing import Any

import diskcache
from diskcache.core import MODE_BINARY, MODE_RAW


class UnreadableEntry(Exception):
    """One entry's stored value could not be read; ``cause`` says why."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(type(cause).__name__)
        self.cause = cause


class JsonDisk(diskcache.Disk):  # type: ignore[misc]
    """diskcache serialization that only hands back bytes, and reports unreadable entries.

    Stock diskcache reports a vanished value file as a missing key and unpickles whatever it
    finds; here both become ``UnreadableEntry`` so the store can log them.
    """

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> Any:
        if mode not in (MODE_RAW, MODE_BINARY):
            raise UnreadableEntry(TypeError(f"value stored in diskcache mode {mode}, not bytes"))
        try:
            return super().fetch(mode, filename, value, read)
        except Exception as exc:
            raise UnreadableEntry(exc) from exc


def describe_failure(exc: BaseException, timeout: float, elapsed: float) -> str:
    if not isinstance(exc, diskcache.Timeout):
        return f"{type(exc).__name__}: {exc}"
    # diskcache turns every failure to begin a write transaction into a bare Timeout.
    if elapsed >= 0.9 * timeout:
        return f"timed out after {timeout:g}s waiting for another writer"
    return "the database refused a write transaction (read-only or unavailable)"

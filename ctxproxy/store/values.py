"""What every backend does alike with values and keys: JSON bytes in and out (``orjson``, never
pickles), the checks of keys and ttls, how a corrupt entry is reported, and how an error raised by
the caller's own code is carried through a backend's error mapping."""

from __future__ import annotations

import math

import orjson
import structlog

from ctxproxy.store.base import JSONValue
from ctxproxy.store.keys import RESERVED_PREFIX

__all__ = [
    "CallerError",
    "canonical",
    "check_key",
    "check_ttl",
    "decode",
    "encode",
    "milliseconds",
    "report_corrupt",
    "stored_bytes",
]

log = structlog.get_logger(__name__)


class CallerError(Exception):
    """Carries an exception raised by caller-supplied code out of the error mapping."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(type(original).__name__)
        self.original = original


def encode(value: JSONValue | None) -> bytes | None:
    """JSON bytes, or ``None`` for "delete". Non-JSON values raise ``TypeError``."""
    return None if value is None else orjson.dumps(value)


def stored_bytes(key: str, stored: object) -> bytes | None:
    """``stored`` when it is bytes; anything else is reported as corrupt and reads as absent."""
    if not isinstance(stored, bytes):
        report_corrupt(key, TypeError(f"stored {type(stored).__name__}, not bytes"))
        return None
    return stored


def decode(key: str, stored: object) -> JSONValue | None:
    """The value of JSON bytes read back under ``key``; anything else is reported as corrupt
    (the key and the error type only, never the bytes) and reads as absent."""
    data = stored_bytes(key, stored)
    if data is None:
        return None
    try:
        value: JSONValue = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        report_corrupt(key, exc)
        return None
    return value


def canonical(value: JSONValue | None) -> bytes:
    """Comparable form: key order ignored, ``1`` ≠ ``1.0`` ≠ ``True`` as in JSON."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def check_ttl(ttl: float | None) -> None:
    if ttl is not None and not (math.isfinite(ttl) and ttl > 0):
        raise ValueError(f"ttl must be a positive number of seconds or None, got {ttl!r}")


def milliseconds(ttl: float) -> int:
    """A ttl in whole milliseconds, rounded up (a backend that counts in them never expires early)."""
    return max(1, math.ceil(ttl * 1000))


def check_key(key: str) -> None:
    if not isinstance(key, str):
        raise TypeError(f"store keys are str, got {type(key).__name__}")
    if key.startswith(RESERVED_PREFIX):
        raise ValueError(f"keys starting with {RESERVED_PREFIX!r} are reserved for the store: {key!r}")


def report_corrupt(key: str, error: BaseException) -> None:
    log.warning("store.corrupt_entry", key=key, error=type(error).__name__)

"""Checking a Redis URL before anything connects with it, and showing one without its password.

Pure (no client library): ``config`` validates ``[store] url`` with ``check_url``, so a typo is a
config error at start-up and in ``ctxproxy config check``, never a connection failure later.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import SplitResult, urlsplit

__all__ = ["SCHEMES", "check_url", "redacted"]

SCHEMES: Final = ("redis", "rediss", "unix")


def check_url(url: str) -> str:
    """``url`` itself when it names a Redis server (``redis://[user:password@]host[:port][/db]``,
    ``rediss://`` for TLS, ``unix:///path/to/socket``); ``ValueError`` saying what is wrong if not."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a URL ({exc}): {redacted(url)!r}") from None
    if parts.scheme not in SCHEMES:
        raise ValueError(
            f"a Redis URL starts with {', '.join(s + '://' for s in SCHEMES)} "
            f"(e.g. redis://localhost:6379/0), got {redacted(url)!r}"
        )
    if parts.scheme == "unix":
        if not parts.path:
            raise ValueError(f"a unix:// URL names the socket's path (unix:///run/redis.sock), got {redacted(url)!r}")
        return url
    if not parts.hostname:
        raise ValueError(f"the Redis URL names no host (redis://HOST:6379/0), got {redacted(url)!r}")
    if port == 0:
        raise ValueError(f"port 0 is not a Redis port, got {redacted(url)!r}")
    _check_db(parts, url)
    return url


def _check_db(parts: SplitResult, url: str) -> None:
    db = parts.path.lstrip("/")
    if db and not db.isdigit():
        raise ValueError(f"the path of a Redis URL is a database number (/0), got {redacted(url)!r}")


def redacted(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages and logs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{user}:***@{host}").geturl()

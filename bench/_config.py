"""The proxy.toml both benchmarks run ctxproxy with: loopback, no downloads, a store of its own."""

from __future__ import annotations

import textwrap
from pathlib import Path


def proxy_toml(store: Path, log_level: str, extra: str = "", metrics: bool = True) -> str:
    return textwrap.dedent(
        f"""\
        [server]
        host = "127.0.0.1"
        log_format = "json"
        log_level = "{log_level}"
        shutdown_timeout = 10
        metrics = {"true" if metrics else "false"}

        [store]
        backend = "diskcache"
        path = "{store}"

        [tokens]
        allow_download = false
        """
    ) + textwrap.dedent(extra)

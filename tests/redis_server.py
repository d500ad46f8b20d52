"""A real ``redis-server`` process on a free loopback port, for the tests that need a Redis.

``RedisServer(workdir).start()`` runs Debian's ``redis-server`` (``.ci/run`` installs it) with
nothing persisted, bound to 127.0.0.1, and waits until it answers ``PING``. Faults are the real
thing: ``stop()`` / ``start()`` again on the same port (down, then back), ``pause()`` / ``resume()``
(SIGSTOP / SIGCONT: a server that hangs). Without the binary a test is skipped, except under CI
(``CI`` set), where that is a failure: CI must run these tests.

Fixtures (import them into a ``conftest.py``): ``redis_server``, one server for the whole session,
and ``own_redis``, a server of the test's own, for tests that stop or pause it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["RedisServer", "own_redis", "redis_server"]

START_TIMEOUT = 15.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _binary() -> str:
    found = shutil.which("redis-server")
    if found is None:
        message = "redis-server is not installed (apt-get install -y redis-server)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


class RedisServer:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._binary = _binary()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = (self.workdir / "redis.log").open("ab")
        argv = [self._binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir)]
        argv += ["--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"]
        with log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._wait_until_answering()
        return self

    def _wait_until_answering(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {(self.workdir / 'redis.log').read_text()[-2000:]}")
            if self.answers():
                return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server not answering on port {self.port} after {START_TIMEOUT:g}s")

    def answers(self) -> bool:
        """Whether the server answers ``PING`` now (one short try)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """Kill it (as a crash would): every connection drops, the port refuses until ``start``."""
        if self.process is not None and self.process.poll() is None:
            self.resume()
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()

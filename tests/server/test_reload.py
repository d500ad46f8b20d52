"""A real ``ctxproxy serve`` process: SIGHUP reloads tenants, a bad reload is refused, SIGTERM exits.

The proxy runs as a subprocess (``python -m ctxproxy serve``); its tenants point at a fake upstream
served by this test's event loop; its stdout is collected line by line (JSON logs).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tests.fakes.upstream import FakeUpstream, start_fake_upstream

REPO = Path(__file__).resolve().parents[2]
BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ProxyProcess:
    def __init__(self, proc: asyncio.subprocess.Process, port: int, config_dir: Path) -> None:
        self.proc = proc
        self.port = port
        self.config_dir = config_dir
        self.lines: list[str] = []
        self.stderr: list[str] = []
        self._readers = [
            asyncio.create_task(self._read(proc.stdout, self.lines)),
            asyncio.create_task(self._read(proc.stderr, self.stderr)),
        ]

    @staticmethod
    async def _read(stream: asyncio.StreamReader | None, into: list[str]) -> None:
        assert stream is not None
        while line := await stream.readline():
            into.append(line.decode(errors="replace").rstrip("\n"))

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.lines:
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict):
                    out.append(obj)
        return out

    async def wait_for_event(self, name: str, after: int = 0, timeout: float = 10) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [e for e in self.events()[after:] if e.get("event") == name]
            if found:
                return found[0]
            if self.proc.returncode is not None:
                break
            await asyncio.sleep(0.02)
        raise AssertionError(
            f"no {name!r} event; stdout:\n" + "\n".join(self.lines) + "\nstderr:\n" + "\n".join(self.stderr)
        )

    async def wait_healthy(self, http: aiohttp.ClientSession, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.returncode is not None:
                break
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
                async with http.get(self.url("/healthz"), timeout=aiohttp.ClientTimeout(total=1)) as resp:
                    if resp.status == 200:
                        return
            await asyncio.sleep(0.05)
        raise AssertionError(
            f"proxy not healthy (rc={self.proc.returncode}); stdout:\n"
            + "\n".join(self.lines)
            + "\nstderr:\n"
            + "\n".join(self.stderr)
        )

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 10)
        for task in self._readers:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(task, 2)


@pytest.fixture
async def fake(aiohttp_server: Callable[..., Awaitable[TestServer]]) -> tuple[FakeUpstream, str]:
    fake, server = await start_fake_upstream(aiohttp_server)
    return fake, str(server.make_url("/v1"))


async def launch(config_dir: Path, **variables: str) -> ProxyProcess:
    """``python -m ctxproxy serve`` on a free port, with none of this process's ``OPENAI_*`` /
    ``CTXPROXY_*`` variables and with ``variables`` (e.g. ``CTXPROXY_DATA`` for proxy.toml)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXPROXY_"))}
    env.update(variables, PYTHONUNBUFFERED="1")
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ctxproxy", "serve", "--config", str(config_dir), "--port", str(port),
        cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    return ProxyProcess(proc, port, config_dir)


@pytest.fixture
async def running(tmp_path: Path, fake: tuple[FakeUpstream, str]) -> AsyncIterator[ProxyProcess]:
    _, base_url = fake
    config_dir = tmp_path / "config"
    (config_dir / "tenants").mkdir(parents=True)
    (config_dir / "proxy.toml").write_text('[server]\nshutdown_timeout = 10\n[store]\npath = "${CTXPROXY_DATA}"\n')
    (config_dir / "tenants" / "default.toml").write_text(f'[upstream]\nbase_url = "{base_url}"\n')
    (config_dir / "tenants" / "acme.toml").write_text(f'[upstream]\nbase_url = "{base_url}"\n')
    process = await launch(config_dir, CTXPROXY_DATA=str(tmp_path / "data"))
    try:
        yield process
    finally:
        await process.stop()


async def post(http: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with http.post(url, json=BODY, timeout=aiohttp.ClientTimeout(total=10)) as resp:
        return resp.status, await resp.json()


async def test_sighup_reload_and_sigterm(running: ProxyProcess, fake: tuple[FakeUpstream, str], tmp_path: Path) -> None:
    upstream, base_url = fake
    async with aiohttp.ClientSession() as http:
        await running.wait_healthy(http)
        assert (await post(http, running.url("/t/acme/v1/chat/completions")))[0] == 200
        status, payload = await post(http, running.url("/t/new/v1/chat/completions"))
        assert status == 404 and payload["error"]["code"] == "tenant_not_found"

        # (a) a slow request is in flight while a tenant is added and SIGHUP arrives.
        upstream.reply_delay(1.5)
        seen_before = len(upstream.chat_requests())
        in_flight = asyncio.create_task(post(http, running.url("/t/acme/v1/chat/completions")))
        deadline = time.monotonic() + 5
        while len(upstream.chat_requests()) == seen_before and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert len(upstream.chat_requests()) == seen_before + 1, "the slow request never reached the upstream"
        mark = len(running.events())
        (running.config_dir / "tenants" / "new.toml").write_text(f'[upstream]\nbase_url = "{base_url}"\n')
        running.signal(signal.SIGHUP)
        reloaded = await running.wait_for_event("config.reloaded", after=mark)
        assert reloaded["generation"] == 2
        assert reloaded["tenants"] == ["acme", "default", "new"]
        assert not in_flight.done(), "the slow request should still be in flight after the reload"
        status, payload = await post(http, running.url("/t/new/v1/chat/completions"))
        assert status == 200 and payload["choices"][0]["message"]["content"] == "echo: hello"
        status, answer = await asyncio.wait_for(in_flight, 10)
        assert status == 200
        assert answer["choices"][0]["message"]["content"] == "echo: hello"

        # (b) a broken tenant file: the reload is refused, the old config keeps serving.
        mark = len(running.events())
        (running.config_dir / "tenants" / "broken.toml").write_text("[upstream]\nbase_url = 'ftp://nope'\n")
        running.signal(signal.SIGHUP)
        rejected = await running.wait_for_event("config.reload_rejected", after=mark)
        assert rejected["level"] == "error"
        assert rejected["kept_generation"] == 2
        assert any("tenants/broken.toml" in e and "upstream.base_url" in e for e in rejected["errors"])
        assert running.proc.returncode is None
        for tenant in ("acme", "new"):
            assert (await post(http, running.url(f"/t/{tenant}/v1/chat/completions")))[0] == 200
        assert (await post(http, running.url("/v1/chat/completions")))[0] == 200
        status, payload = await post(http, running.url("/t/broken/v1/chat/completions"))
        assert status == 404 and payload["error"]["code"] == "tenant_not_found"
        async with http.get(running.url("/readyz")) as resp:
            assert resp.status == 200
            assert (await resp.json())["config_generation"] == 2

        # Every stdout line is one JSON object; requests are logged as "request" events.
        await running.wait_for_event("request", after=mark)
        assert running.lines
        for line in running.lines:
            assert isinstance(json.loads(line), dict), line
        requests = [e for e in running.events() if e.get("event") == "request"]
        new_lines = [e for e in requests if e.get("tenant") == "new"]
        assert new_lines and new_lines[0]["status"] == 200 and new_lines[0]["request_id"]
        assert {"timestamp", "level", "latency_ms", "session"} <= set(new_lines[0])
        assert any(e.get("status") == 404 and e.get("path") == "/t/broken/v1/chat/completions" for e in requests)

    # (c) SIGTERM: a clean exit, quickly.
    running.signal(signal.SIGTERM)
    rc = await asyncio.wait_for(running.proc.wait(), 8)
    assert rc == 0, "\n".join(running.stderr)
    # Session records were written to the configured store directory.
    assert (tmp_path / "data" / "cache.db").exists()


async def test_sigterm_lets_an_in_flight_request_finish(running: ProxyProcess, fake: tuple[FakeUpstream, str]) -> None:
    upstream, _ = fake
    async with aiohttp.ClientSession() as http:
        await running.wait_healthy(http)
        upstream.reply_delay(1.0)
        in_flight = asyncio.create_task(post(http, running.url("/v1/chat/completions")))
        deadline = time.monotonic() + 5
        while not upstream.chat_requests() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert upstream.chat_requests(), "the slow request never reached the upstream"
        running.signal(signal.SIGTERM)
        status, answer = await asyncio.wait_for(in_flight, 10)
        assert status == 200
        assert answer["choices"][0]["message"]["content"] == "echo: hello"
    rc = await asyncio.wait_for(running.proc.wait(), 10)
    assert rc == 0, "\n".join(running.stderr)
    assert upstream.cancellations == 0


@pytest.fixture
async def running_on_defaults(tmp_path: Path, fake: tuple[FakeUpstream, str]) -> AsyncIterator[ProxyProcess]:
    """The upstream URL and the admin key come from ctxproxy.toml; the tenant file is empty."""
    _, base_url = fake
    config_dir = tmp_path / "config"
    (config_dir / "tenants").mkdir(parents=True)
    (config_dir / "proxy.toml").write_text(
        f'[store]\npath = "${{CTXPROXY_DATA}}"\n[admin]\napi_key = "{ADMIN_KEY}"\n'
        f'[defaults.upstream]\nbase_url = "{base_url}"\n'
    )
    (config_dir / "tenants" / "default.toml").write_text("")
    process = await launch(config_dir, CTXPROXY_DATA=str(tmp_path / "data"))
    try:
        yield process
    finally:
        await process.stop()


ADMIN_KEY = "adm-reload-secret-1"


async def admin_status(http: aiohttp.ClientSession, running: ProxyProcess) -> int:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with http.get(running.url("/admin/tenants/default/sessions"), headers=headers) as resp:
        return resp.status


async def test_sighup_without_proxy_toml_or_tenant_files_keeps_the_old_config(
    running_on_defaults: ProxyProcess, fake: tuple[FakeUpstream, str]
) -> None:
    running = running_on_defaults
    upstream, _ = fake
    proxy_toml = running.config_dir / "proxy.toml"
    tenant_file = running.config_dir / "tenants" / "default.toml"
    async with aiohttp.ClientSession() as http:
        await running.wait_healthy(http)
        assert await admin_status(http, running) == 200

        for missing, reason in ((proxy_toml, "proxy.toml: file not found"), (tenant_file, "tenants/: no tenant files")):
            text = missing.read_text()
            missing.unlink()
            mark = len(running.events())
            running.signal(signal.SIGHUP)
            rejected = await running.wait_for_event("config.reload_rejected", after=mark)
            assert rejected["level"] == "error" and rejected["kept_generation"] == 1
            assert any(reason in e for e in rejected["errors"]), rejected
            # The old config still serves: the upstream from ctxproxy.toml, the admin API on.
            seen = len(upstream.chat_requests())
            status, answer = await post(http, running.url("/v1/chat/completions"))
            assert status == 200 and answer["choices"][0]["message"]["content"] == "echo: hello"
            assert len(upstream.chat_requests()) == seen + 1
            assert await admin_status(http, running) == 200
            missing.write_text(text)

    # One JSON line per event, and the admin key is in none of them.
    for line in running.lines:
        assert isinstance(json.loads(line), dict), line
    assert ADMIN_KEY not in "\n".join(running.lines + running.stderr)

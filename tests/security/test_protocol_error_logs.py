"""Requests the HTTP parser refuses leave no secret and no raw bytes in the log.

A real ``ctxproxy serve`` process gets malformed requests that carry a secret in their
Authorization header and body (bad framing, control characters, a bad method, oversize headers,
TLS bytes …) and one whose body stalls. aiohttp's parser errors quote the offending bytes; the
log must hold one JSON object per line, naming the error's type and a short reason, and never
the secret.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.raw_http import exchange, malformed_requests
from tests.server.test_reload import REPO, ProxyProcess, free_port

SECRET = "sk-LEAKTEST-7a41c09e"
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[ProxyProcess]:
    config_dir = tmp_path / "config"
    (config_dir / "tenants").mkdir(parents=True)
    (config_dir / "proxy.toml").write_text(f'[server]\nread_timeout = 0.5\n[store]\npath = "{tmp_path / "data"}"\n')
    (config_dir / "tenants" / "default.toml").write_text('[upstream]\nbase_url = "http://127.0.0.1:9/v1"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXPROXY_"))}
    env["PYTHONUNBUFFERED"] = "1"
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ctxproxy", "serve", "--config", str(config_dir), "--port", str(port),
        cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    process = ProxyProcess(proc, port, config_dir)
    try:
        yield process
    finally:
        await process.stop()


async def test_parser_errors_are_logged_as_json_without_the_bytes(running: ProxyProcess) -> None:
    async with aiohttp.ClientSession() as http:
        await running.wait_healthy(http)
    cases = malformed_requests(SECRET)
    for request in cases.values():
        await exchange("127.0.0.1", running.port, request)
    stalled = f"POST /v1/chat/completions HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer {SECRET}\r\nContent-Length: 500\r\n\r\n"
    await exchange("127.0.0.1", running.port, (stalled + '{"messages": "' + SECRET).encode())
    await running.wait_for_event("request")  # the stalled request's line: every case has been handled
    running.signal(signal.SIGTERM)
    assert await asyncio.wait_for(running.proc.wait(), 15) == 0
    await running.stop()  # collects the rest of stdout and stderr

    output = "\n".join(running.lines + running.stderr)
    assert SECRET not in output
    assert SECRET.encode().hex() not in output and "Bearer" not in output
    # stderr holds the one line for a person at a terminal (where it listens), nothing else
    url = f"http://127.0.0.1:{running.port}"
    assert [line for line in running.stderr if line.strip()] == [
        f"ctxproxy listening on {url} (OpenAI base_url: {url}/v1, Anthropic base_url: {url}, Gemini base_url: {url}; "
        f"config: {running.config_dir.resolve()})"
    ]
    events = [json.loads(line) for line in running.lines if line.strip()]
    assert all(isinstance(event, dict) for event in events)
    errors = [e for e in events if e["event"] == "http.protocol_error"]
    assert len(errors) == len(cases)
    assert {"BadHttpMethod", "LineTooLong", "BadHttpMessage"} <= {e["error"] for e in errors}
    for event in errors:
        assert event["status"] == 400 and event["level"] == "warning"
        assert set(event) <= {"event", "level", "timestamp", "status", "error", "reason", "remote", "logger"}
        assert "\\x" not in json.dumps(event) and "b'" not in json.dumps(event)
    [timed_out] = [e for e in events if e["event"] == "request" and e["status"] == 408]
    assert timed_out["path"] == "/v1/chat/completions"

"""The README's quick start, in an empty directory outside the repository: ``ctxproxy init``, then
``ctxproxy serve`` with ``OPENAI_BASE_URL`` in the environment, then the openai SDK pointed at the
proxy by base URL only. The upstream is a fake OpenAI server on loopback."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import openai
import pytest
from aiohttp.test_utils import TestServer

from tests.fakes.upstream import start_fake_upstream
from tests.server.test_reload import ProxyProcess, free_port

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


async def test_init_then_serve_answers_the_openai_sdk(
    tmp_path: Path, aiohttp_server: Callable[..., Awaitable[TestServer]]
) -> None:
    fake, server = await start_fake_upstream(aiohttp_server)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXPROXY_"))}
    env.update(OPENAI_BASE_URL=str(server.make_url("/v1")), PYTHONUNBUFFERED="1")

    init = await asyncio.create_subprocess_exec(sys.executable, "-m", "ctxproxy", "init", cwd=tmp_path, env=env)
    assert await asyncio.wait_for(init.wait(), 30) == 0

    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ctxproxy", "serve", "--port", str(port),
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    running = ProxyProcess(proc, port, tmp_path / "config")
    try:
        async with aiohttp.ClientSession() as http:
            await running.wait_healthy(http)
        client = openai.AsyncOpenAI(base_url=running.url("/v1"), api_key="sk-client-key", max_retries=0)
        raw = await client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "first request"}]
        )
        await client.close()
        assert raw.parse().choices[0].message.content == "echo: first request"
        assert raw.headers["X-Ctx-Strategy"] == "cut_point"  # the starter tenant's
        assert int(raw.headers["X-Ctx-Tokens-Before"]) > 0
        [sent] = fake.chat_requests()
        assert sent.headers["Authorization"] == "Bearer sk-client-key"  # no OPENAI_API_KEY: passed through
        assert (tmp_path / "data").is_dir()  # the store, where serve runs
        running.proc.terminate()
        assert await asyncio.wait_for(running.proc.wait(), 30) == 0
    finally:
        await running.stop()

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
import anthropic
import openai
import pytest
from aiohttp.test_utils import TestServer

from tests.fakes.anthropic_upstream import credential, start_fake_anthropic
from tests.fakes.upstream import start_fake_upstream
from tests.server.test_reload import REPO, ProxyProcess, free_port

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


async def test_init_then_serve_answers_the_openai_sdk(
    tmp_path: Path, aiohttp_server: Callable[..., Awaitable[TestServer]]
) -> None:
    fake, server = await start_fake_upstream(aiohttp_server)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXPROXY_"))}
    env.update(OPENAI_BASE_URL=str(server.make_url("/v1")), PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO))

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


def readme_python_snippet() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index("```python\n", readme.index("\n## Quick start\n")) + len("```python\n")
    return readme[start : readme.index("```\n", start)]


async def test_serve_without_any_config_serves_the_built_in_starter_and_the_readme_snippet_works(
    tmp_path: Path, aiohttp_server: Callable[..., Awaitable[TestServer]]
) -> None:
    """The README's first command, ``ctxproxy serve``, in a directory with no config at all; then
    the quick start's Python snippet as it is written, without OPENAI_API_KEY anywhere."""
    fake, server = await start_fake_upstream(aiohttp_server)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXPROXY_"))}
    env.update(OPENAI_BASE_URL=str(server.make_url("/v1")), PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO))
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ctxproxy", "serve", "--port", str(port),
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    running = ProxyProcess(proc, port, tmp_path)
    try:
        async with aiohttp.ClientSession() as http:
            await running.wait_healthy(http)
        url = running.url("")
        assert running.stderr == [
            f"ctxproxy listening on {url} (OpenAI base_url: {url}/v1, Anthropic base_url: {url}, Gemini base_url: "
            f"{url}; config: the built-in "
            f"starter config (no config/ in {tmp_path}; `ctxproxy init` writes it there to edit))"
        ]
        snippet = readme_python_snippet()
        assert "http://127.0.0.1:8080/v1" in snippet
        client = await asyncio.create_subprocess_exec(
            sys.executable, "-c", snippet.replace("http://127.0.0.1:8080", url),
            cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(client.communicate(), 60)
        assert client.returncode == 0, err.decode()
        tokens_line, answer = out.decode().splitlines()
        before, after, strategy = tokens_line.split()
        assert int(before) > 0 and int(after) == int(before) and strategy == "cut_point"
        assert answer == "echo: hi"
        assert (tmp_path / "data").is_dir() and not (tmp_path / "config").exists()
        [sent] = fake.chat_requests()
        assert sent.headers["Authorization"].startswith("Bearer ")  # the snippet's placeholder, passed through
    finally:
        await running.stop()


async def test_init_for_an_anthropic_upstream_then_serve_answers_the_anthropic_sdk(
    tmp_path: Path, aiohttp_server: Callable[..., Awaitable[TestServer]]
) -> None:
    fake, server = await start_fake_anthropic(aiohttp_server)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CTXPROXY_", "ANTHROPIC_"))}
    env.update(ANTHROPIC_UPSTREAM_URL=str(server.make_url("/v1")), PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO))
    init = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ctxproxy", "init", "--upstream", "anthropic",
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    said, _ = await asyncio.wait_for(init.communicate(), 30)
    assert init.returncode == 0
    assert "upstream key: none (ANTHROPIC_API_KEY is not set): each client's own x-api-key is passed through" in (
        said.decode()
    )
    assert "clients: Anthropic SDKs and Claude Code at http://127.0.0.1:8080 (no /v1: they add it)" in said.decode()

    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ctxproxy", "serve", "--port", str(port),
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    running = ProxyProcess(proc, port, tmp_path / "config")
    try:
        async with aiohttp.ClientSession() as http:
            await running.wait_healthy(http)
        client = anthropic.AsyncAnthropic(base_url=running.url(""), api_key="sk-ant-client", max_retries=0)
        raw = await client.messages.with_raw_response.create(
            model="claude-test-1", max_tokens=64, messages=[{"role": "user", "content": "first request"}]
        )
        await client.close()
        assert raw.headers["X-Ctx-Strategy"] == "cut_point"
        message = await raw.parse()
        assert "first request" in message.content[0].text  # type: ignore[union-attr]
        [sent] = fake.message_requests()
        assert credential(sent.headers) == "sk-ant-client"  # no ANTHROPIC_API_KEY: passed through
    finally:
        await running.stop()

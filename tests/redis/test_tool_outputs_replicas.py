"""Tool outputs across two ``ctxproxy serve`` replicas on one real Redis: a result compressed by
one replica is forwarded as the same bytes by the other (the session's record is in the store,
not in a process), and the other answers ``ctxproxy_retrieve`` — from the original the first kept
in Redis once the client no longer sends it."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ctxproxy.tool_outputs import ref_of
from tests.conftest import Upstream
from tests.protocols.test_tool_outputs import pytest_log
from tests.redis_server import RedisServer
from tests.server.test_reload import ProxyProcess, launch

MODEL = "ctx-test-model"
TENANT = """
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "cut_point"
[compaction.tool_outputs]
min_tokens = 200
"""
CALL = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pytest -v"}'}}
LOG = pytest_log("test_checkout_total")
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


@pytest.fixture
async def replicas(tmp_path: Path, upstream: Upstream, redis_server: RedisServer) -> AsyncIterator[list[ProxyProcess]]:
    config = tmp_path / "config"
    (config / "tenants").mkdir(parents=True)
    prefix = f"tool-outputs-{secrets.token_hex(4)}:"
    (config / "proxy.toml").write_text(f'[store]\nbackend = "redis"\nurl = "${{REDIS_URL}}"\nkey_prefix = "{prefix}"\n')
    (config / "tenants" / "default.toml").write_text(TENANT.replace("{upstream}", upstream.base_url))
    started = await asyncio.gather(*(launch(config, REDIS_URL=redis_server.url) for _ in range(2)))
    try:
        async with aiohttp.ClientSession() as http:
            for replica in started:
                await replica.wait_healthy(http, timeout=30)
        yield list(started)
    finally:
        await asyncio.gather(*(replica.stop() for replica in started))


async def post(http: aiohttp.ClientSession, replica: ProxyProcess, messages: list[dict[str, Any]]) -> str:
    body = {"model": MODEL, "messages": messages, "tools": TOOLS}
    async with http.post(replica.url("/v1/chat/completions"), json=body, headers={"X-Session-Id": "agent"}) as resp:
        assert resp.status == 200, await resp.text()
        return str((await resp.json())["choices"][0]["message"]["content"])


async def test_the_other_replica_sends_the_same_bytes_and_retrieves(
    replicas: list[ProxyProcess], upstream: Upstream
) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Run the tests."},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": LOG},
    ]
    async with aiohttp.ClientSession() as http:
        await post(http, replicas[0], messages)
        first = upstream.fake.chat_requests()[-1].json()["messages"][-1]["content"]
        assert len(first) < len(LOG) / 3 and ref_of(LOG) in first
        messages += [{"role": "assistant", "content": "One test fails."}, {"role": "user", "content": "Which?"}]
        retrieve = {"name": "ctxproxy_retrieve", "arguments": json.dumps({"ref": ref_of(LOG), "query": "FAILED"})}
        upstream.fake.reply_json(tool_calls=[{"function": retrieve}])
        upstream.fake.reply_json("test_checkout_total fails.")
        assert await post(http, replicas[1], messages) == "test_checkout_total fails."
        second, answered = (r.json()["messages"] for r in upstream.fake.chat_requests()[-2:])
        assert second[2]["content"] == first  # the same bytes, from the other process
        assert "test_checkout_total FAILED" in answered[-1]["content"]

        upstream.fake.reply_json(tool_calls=[{"function": retrieve}])
        upstream.fake.reply_json("Still test_checkout_total.")
        cut = [{"role": "user", "content": f"What failed in {ref_of(LOG)}?"}]  # the client cut its history
        assert await post(http, replicas[1], cut) == "Still test_checkout_total."
    assert "test_checkout_total FAILED" in upstream.fake.chat_requests()[-1].json()["messages"][-1]["content"]

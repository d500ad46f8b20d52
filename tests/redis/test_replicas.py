"""Three ``ctxproxy serve`` processes on one real Redis, as replicas behind a round-robin balancer.

One long conversation goes round-robin across them, summarised by an LLM whose calls the fake
upstream counts (``tests/redis/summaries.py``): each compaction happens exactly once (one summary
call each, never the same range twice), every replica goes on from the checkpoints another made,
a memory written through one replica is found through another, and a replica killed (SIGKILL) in
the middle of a compaction loses nothing: the client's retry at another replica takes the lease
over once it expires (a second, ``summary_timeout / 4``) and compacts.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from multidict import CIMultiDict

from tests.conftest import Upstream
from tests.redis.summaries import FACT, MODEL, Summaries, leg, tenant
from tests.redis_server import RedisServer
from tests.server.test_reload import ProxyProcess, launch

REPLICAS = 3
SESSION = "long-trip"
TENANT = tenant(summary_timeout=4, memory=True, reserve=600, keep=700)


@pytest.fixture
async def replicas(tmp_path: Path, upstream: Upstream, redis_server: RedisServer) -> AsyncIterator[list[ProxyProcess]]:
    config = tmp_path / "config"
    (config / "tenants").mkdir(parents=True)
    prefix = f"replicas-{secrets.token_hex(4)}:"
    (config / "proxy.toml").write_text(f'[store]\nbackend = "redis"\nurl = "${{REDIS_URL}}"\nkey_prefix = "{prefix}"\n')
    (config / "tenants" / "default.toml").write_text(TENANT.replace("{upstream}", upstream.base_url))
    started = await asyncio.gather(*(launch(config, REDIS_URL=redis_server.url) for _ in range(REPLICAS)))
    try:
        async with aiohttp.ClientSession() as http:
            for replica in started:
                await replica.wait_healthy(http, timeout=30)
        yield list(started)
    finally:
        await asyncio.gather(*(replica.stop() for replica in started))


async def post(http: aiohttp.ClientSession, replica: ProxyProcess, messages: list[dict[str, Any]]) -> CIMultiDict[str]:
    body = {"model": MODEL, "messages": messages, "user": "alice"}
    headers = {"X-Session-Id": SESSION}
    async with http.post(replica.url("/v1/chat/completions"), json=body, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        answer = await resp.json()
        messages.append(answer["choices"][0]["message"])
        return CIMultiDict(resp.headers)


async def compactions(replicas: list[ProxyProcess], at_least: int = 1) -> list[tuple[int, dict[str, Any]]]:
    """Every ``compaction`` log event, with the number of the replica that logged it (at least
    ``at_least`` of them: the replicas' logs are read as they come)."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        found = [(i, e) for i, r in enumerate(replicas) for e in r.events() if e.get("event") == "compaction"]
        if len(found) >= at_least or asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(0.02)


async def test_three_replicas_share_one_conversation(replicas: list[ProxyProcess], summaries: Summaries) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful travel agent."}]
    async with aiohttp.ClientSession() as http:
        for n in range(1, 46):  # round-robin, as a load balancer would
            messages.append(leg(n))
            await post(http, replicas[n % REPLICAS], messages)
        made = await compactions(replicas, at_least=3)
        assert len({i for i, _ in made}) >= 2  # they were made by more than one replica
        # Each compaction exactly once, by one replica: never the same range twice, never the same
        # summary prompt twice (a compaction repeated elsewhere would send the same one again).
        ends = [e["range"][1] for _, e in sorted(made, key=lambda m: m[1]["timestamp"])]
        assert ends == sorted(set(ends))
        assert all(e["saved"] for _, e in made)
        assert len(set(summaries.prompts)) == summaries.calls >= len(made)
        calls = summaries.calls
        # Every replica goes on from the newest checkpoint, whoever made it: no summary.
        for replica in replicas:
            headers = await post(http, replica, [*messages, leg(99)])
            assert int(headers["X-Ctx-Tokens-After"]) < int(headers["X-Ctx-Tokens-Before"])
        assert summaries.calls == calls

        # A memory written with a summary made by one replica is found through another.
        writer = made[0][0]
        reader = replicas[(writer + 1) % REPLICAS]
        question = [{"role": "user", "content": "Which database does the orders service run on?"}]
        async with http.post(
            reader.url("/v1/chat/completions"), json={"model": MODEL, "messages": question, "user": "alice"}
        ) as resp:
            assert resp.status == 200 and resp.headers["X-Ctx-Memories"] != "0"
        sent = summaries.fake.chat_requests()[-1].json()["messages"]
        assert any(FACT in str(m.get("content")) for m in sent)


async def test_a_replica_killed_mid_compaction_loses_nothing(
    replicas: list[ProxyProcess], summaries: Summaries
) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful travel agent."}]
    async with aiohttp.ClientSession() as http:
        n = 0
        while summaries.calls < 1:  # up to the first compaction
            n += 1
            messages.append(leg(n))
            await post(http, replicas[n % REPLICAS], messages)
        calls = summaries.calls
        victim, survivor = replicas[0], replicas[1]
        held = summaries.hold(calls + 1)  # the victim's summary never comes back
        messages.append(leg(n + 1, words=450))  # too long to forward without compacting first
        doomed = asyncio.create_task(post(http, victim, list(messages)))
        await summaries.wait_for(calls + 1)
        victim.proc.kill()  # SIGKILL in the middle of the compaction, holding the session's lease
        with contextlib.suppress(aiohttp.ClientError):
            await doomed
        assert doomed.exception() is not None
        held.set()
        # The client retries at another replica: it waits out the dead holder's lease and compacts.
        headers = await asyncio.wait_for(post(http, survivor, list(messages)), 20)
        assert int(headers["X-Ctx-Tokens-After"]) < int(headers["X-Ctx-Tokens-Before"])
        retried = [e for i, e in await compactions(replicas, at_least=2) if i == 1]
        assert retried and retried[-1]["saved"]
        # The third replica, asked the same, goes on from that checkpoint with no new summary.
        calls = summaries.calls
        again = await post(http, replicas[2], list(messages))
        assert again["X-Ctx-Tokens-After"] == headers["X-Ctx-Tokens-After"]
        assert summaries.calls == calls

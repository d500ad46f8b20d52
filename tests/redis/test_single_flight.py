"""Distributed single flight: two replicas (two proxy apps, each with its own ``RedisStore``) on one
real Redis. One compaction of a session at a time across them, and a replica whose lease was taken
over while it hung never overwrites the newer checkpoint (fencing tokens)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest
import redis
from multidict import CIMultiDict
from structlog.testing import capture_logs

from ctxproxy.compaction.checkpoints import decode_index, stored_fence
from ctxproxy.services import STORE
from ctxproxy.session import SessionKey
from ctxproxy.store.keys import checkpoints_key, compaction_lock_key, lease_record_key
from ctxproxy.strategies.base import Checkpoint
from tests.conftest import MakeProxy, Proxy
from tests.redis.summaries import MODEL, Summaries, conversation, tenant
from tests.redis_server import RedisServer

SESSION = "rail-trip"
TENANT = tenant(summary_timeout=8)


@pytest.fixture
async def replicas(make_proxy: MakeProxy, redis_server: RedisServer) -> tuple[Proxy, Proxy]:
    """Two proxies on one Redis namespace of this test's own."""
    toml = f'backend = "redis"\nurl = "{redis_server.url}"\nkey_prefix = "sf-{secrets.token_hex(4)}:"\n'
    first = await make_proxy({"default": TENANT}, proxy_toml=toml)
    second = await make_proxy({"default": TENANT}, proxy_toml=toml)
    return first, second


async def post(proxy: Proxy, messages: list[dict[str, Any]]) -> Mapping[str, str]:
    async with aiohttp.ClientSession() as http:
        body = {"model": MODEL, "messages": messages}
        async with http.post(proxy.url("/v1/chat/completions"), json=body, headers={"X-Session-Id": SESSION}) as resp:
            assert resp.status == 200, await resp.text()
            await resp.read()
            return CIMultiDict(resp.headers)


def text_of(checkpoint: Checkpoint) -> str:
    return "\n".join(block.text for block in checkpoint.blocks)


async def stored_index(proxy: Proxy) -> Any:
    return await proxy.server.app[STORE].get(checkpoints_key(SessionKey("default", SESSION, "header")))


async def test_two_replicas_hit_at_once_compact_the_session_once(
    replicas: tuple[Proxy, Proxy], summaries: Summaries
) -> None:
    first, second = replicas
    messages = conversation(50)
    gate = summaries.hold(1)
    answers = [asyncio.create_task(post(first, messages))]
    await summaries.wait_for(1)  # the first replica compacts, holding the session's lease
    answers.append(asyncio.create_task(post(second, messages)))
    await asyncio.sleep(0.3)  # the second finds the lease taken and waits for it
    assert not answers[1].done()
    gate.set()
    headers = await asyncio.gather(*answers)
    assert summaries.calls == 1
    assert [int(h["X-Ctx-Tokens-After"]) < int(h["X-Ctx-Tokens-Before"]) for h in headers] == [True, True]
    (checkpoint,) = decode_index(await stored_index(second))
    assert "(summary 1)" in text_of(checkpoint)
    # Every later request, on either replica, goes on from that checkpoint.
    for proxy in (second, first, second):
        await post(proxy, messages)
    assert summaries.calls == 1


async def test_a_replica_whose_lease_was_taken_over_saves_nothing_over_the_newer_checkpoint(
    replicas: tuple[Proxy, Proxy], summaries: Summaries, redis_server: RedisServer
) -> None:
    first, second = replicas
    messages = conversation(50)
    hung = summaries.hold(1)
    with capture_logs() as logs:
        stalled = asyncio.create_task(post(first, messages))
        await summaries.wait_for(1)
        # The first replica hangs in its summariser past its lease: its lease expires (here, at
        # once: the record is gone as an expiry would remove it) and the second takes it over.
        prefix = first.holder.current.settings.store.key_prefix
        lease = prefix + lease_record_key(compaction_lock_key(SessionKey("default", SESSION, "header")))
        with redis.Redis.from_url(redis_server.url) as raw:
            assert raw.delete(lease) == 1
        await post(second, messages)
        assert summaries.calls == 2
        newer = await stored_index(second)
        hung.set()
        await stalled  # its request is still answered, with its own summary
    fenced = [e for e in logs if e["event"] == "compaction.fenced"]
    assert len(fenced) == 1 and fenced[0]["fence"] < fenced[0]["newer_fence"]
    assert fenced[0]["newer_fence"] == stored_fence(newer)
    assert await stored_index(first) == newer  # untouched by the late writer
    (checkpoint,) = decode_index(newer)
    assert "(summary 2)" in text_of(checkpoint)

"""What a replica keeps in process memory is never served stale when another replica changed the
shared state: memory search indexes are checked against the layers' version entries in Redis on
every search, and the known-prefix cache is checked against the request's own messages."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from ctxproxy.memory.cards import MemoryCard, card_id
from ctxproxy.memory.memories import MemoryStore
from ctxproxy.memory.scopes import MemoryScope
from ctxproxy.store import Store, open_store
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.redis_server import RedisServer

SCOPE = MemoryScope("acme", "acme:h:s1", user="alice")


def card(content: str) -> MemoryCard:
    return MemoryCard(card_id(content), content, "fact", (), 1.0, "src")


@pytest.fixture
async def two_stores(redis_server: RedisServer) -> AsyncIterator[tuple[Store, Store]]:
    prefix = f"caches-{secrets.token_hex(4)}:"
    stores = (
        open_store("redis", url=redis_server.url, key_prefix=prefix),
        open_store("redis", url=redis_server.url, key_prefix=prefix),
    )
    yield stores
    for store in stores:
        await store.close()


async def found(memories: MemoryStore, query: str) -> list[str]:
    return [hit.doc.content for hit in await memories.search(SCOPE, query, 5)]


async def test_a_replicas_cached_search_index_follows_what_another_replica_wrote(
    two_stores: tuple[Store, Store],
) -> None:
    here, there = MemoryStore(two_stores[0]), MemoryStore(two_stores[1])
    await here.add(SCOPE, [card("The orders service runs on PostgreSQL 16.")])
    assert await found(here, "orders database") == ["The orders service runs on PostgreSQL 16."]
    assert here.cache_info[0] >= 1  # the layer's index is cached here now
    await there.add(SCOPE, [card("The billing service keeps invoices in S3 bucket 7.")])
    assert await found(here, "billing invoices bucket") == ["The billing service keeps invoices in S3 bucket 7."]
    assert await there.delete_user_memories("acme", "alice") == 2
    assert await found(here, "orders database") == []
    assert await found(here, "billing invoices bucket") == []


TENANT = """
default_context_window = 100000
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "none"
"""


async def post(proxy: Proxy, messages: list[dict[str, Any]]) -> int:
    async with aiohttp.ClientSession() as http:
        body = {"model": "m", "messages": messages}
        async with http.post(proxy.url("/v1/chat/completions"), json=body, headers={"X-Session-Id": "s"}) as resp:
            assert resp.status == 200, await resp.text()
            return int(resp.headers["X-Ctx-Tokens-Before"])


async def test_the_known_prefix_cache_is_checked_against_each_requests_own_messages(
    make_proxy: MakeProxy, upstream: Upstream, redis_server: RedisServer
) -> None:
    toml = f'backend = "redis"\nurl = "{redis_server.url}"\nkey_prefix = "known-{secrets.token_hex(4)}:"\n'
    here = await make_proxy({"default": TENANT}, proxy_toml=toml)
    there = await make_proxy({"default": TENANT}, proxy_toml=toml)
    messages = [{"role": "user", "content": f"question {n} " + "word " * n} for n in range(1, 30)]
    assert await post(here, messages) == await post(there, messages)  # ``here`` remembers this list
    # The conversation goes on at the other replica, with an earlier message edited there.
    edited = [{"role": "user", "content": "a much longer first question " * 40}, *messages[1:]]
    expected = await post(there, edited)
    assert await post(here, edited) == expected  # not the remembered counts of the old list
    sent = [r.json()["messages"] for r in upstream.fake.chat_requests()[-2:]]
    assert sent[0] == sent[1] == edited

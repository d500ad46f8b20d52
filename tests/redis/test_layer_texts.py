"""Memory layers written over a value of the earlier layout lose nothing on a real Redis too
(``tests/memory/test_layer_texts.py``)."""

from __future__ import annotations

import secrets

from ctxproxy.store import open_store
from tests.memory.test_layer_texts import writes_lose_nothing
from tests.redis_server import RedisServer


async def test_writes_over_an_old_layout_lose_nothing_on_redis(redis_server: RedisServer) -> None:
    store = open_store("redis", url=redis_server.url, key_prefix=f"texts-{secrets.token_hex(4)}:")
    try:
        await writes_lose_nothing(store)
    finally:
        await store.close()

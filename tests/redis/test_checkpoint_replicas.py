"""A replica never acts on a stale checkpoint index: it keeps the index it decoded last, but reads
the index from Redis at every request and takes what it kept only for the very bytes it decoded
(``ctxproxy.compaction.index_memo``), so another replica's compaction, refusal or ``forget``
is seen at the next request."""

from __future__ import annotations

import secrets

from ctxproxy.store import open_store
from tests.compaction.test_index_memo import follows_every_write
from tests.redis_server import RedisServer


async def test_a_replica_reads_every_checkpoint_write_of_another(redis_server: RedisServer) -> None:
    prefix = f"checkpoints-{secrets.token_hex(4)}:"
    here = open_store("redis", url=redis_server.url, key_prefix=prefix)
    there = open_store("redis", url=redis_server.url, key_prefix=prefix)
    try:
        await follows_every_write(here, there)
    finally:
        await here.close()
        await there.close()

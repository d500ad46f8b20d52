"""Redis failing under a proxy that is serving: down or hanging mid-traffic, requests are still
answered and compacted (in memory, as with a failing disk), the outage is logged once per interval
rather than once per operation, and the proxy uses Redis again by itself once it is back."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import aiohttp
from multidict import CIMultiDict
from structlog.testing import capture_logs

from tests.conftest import MakeProxy, Proxy
from tests.metrics.scrape import scrape
from tests.redis.summaries import MODEL, Summaries, conversation, tenant
from tests.redis_server import RedisServer

DEADLINE = 10.0  # seconds: no request may take longer, a hang is a failure
TENANT = tenant(summary_timeout=8, memory=True)


async def post(proxy: Proxy, messages: list[dict[str, Any]], session: str) -> CIMultiDict[str]:
    async with aiohttp.ClientSession() as http:
        body = {"model": MODEL, "messages": messages, "user": "alice"}
        headers = {"X-Session-Id": session}
        async with http.post(proxy.url("/v1/chat/completions"), json=body, headers=headers) as resp:
            assert resp.status == 200, await resp.text()
            await resp.read()
            return CIMultiDict(resp.headers)


async def reachable_again(proxy: Proxy) -> None:
    """Send small requests (nothing to compact) until the proxy has used Redis again."""
    with capture_logs() as logs:
        deadline = time.monotonic() + 10
        while not any(e["event"] == "store.reachable_again" for e in logs):
            assert time.monotonic() < deadline, "the proxy never used Redis again"
            await post(proxy, conversation(3), "probe")
            await asyncio.sleep(0.05)


def compacted(headers: CIMultiDict[str]) -> bool:
    return int(headers["X-Ctx-Tokens-After"]) < int(headers["X-Ctx-Tokens-Before"])


async def test_redis_down_mid_traffic_costs_no_request_and_is_used_again_when_back(
    make_proxy: MakeProxy, own_redis: RedisServer, summaries: Summaries
) -> None:
    toml = f'backend = "redis"\nurl = "{own_redis.url}"\ntimeout = 0.5\nkey_prefix = "f-{secrets.token_hex(3)}:"\n'
    proxy = await make_proxy({"default": TENANT}, proxy_toml=toml)
    assert compacted(await post(proxy, conversation(50), "before"))
    own_redis.stop()
    with capture_logs() as logs:
        for n in range(6):  # six sessions, each compacted in memory only
            assert compacted(await post(proxy, conversation(50 + n), f"during-{n}"))
    events = [e["event"] for e in logs]
    assert events.count("store.unreachable") == 1
    assert "store.reachable_again" not in events
    # Logged once, not once per operation of each request: only the operation that found the
    # outage is logged by its caller; the others failed at once, and the store counts them.
    warnings = [e["event"] for e in logs if e["log_level"] == "warning"]
    assert len(warnings) <= 2, warnings
    assert [e["saved"] for e in logs if e["event"] == "compaction"] == [False] * 6
    assert summaries.calls == 7
    # Through the app's store wrapper, every failed operation is counted, the unsaved checkpoints too.
    failed = await scrape(proxy.url("/metrics"))
    assert failed.total("ctxproxy_store_errors_total", op="update") >= 6
    assert failed.total("ctxproxy_store_errors_total", op="lock.acquire") >= 6
    own_redis.start()
    await reachable_again(proxy)
    with capture_logs() as logs:
        assert compacted(await post(proxy, conversation(50), "after"))
    assert [e["saved"] for e in logs if e["event"] == "compaction"] == [True]
    calls = summaries.calls
    assert compacted(await post(proxy, conversation(50), "after"))
    assert summaries.calls == calls  # its checkpoint was saved in Redis and is reused


async def test_redis_hanging_mid_traffic_costs_no_request_and_is_used_again_when_it_wakes(
    make_proxy: MakeProxy, own_redis: RedisServer, summaries: Summaries
) -> None:
    toml = f'backend = "redis"\nurl = "{own_redis.url}"\ntimeout = 0.3\nkey_prefix = "h-{secrets.token_hex(3)}:"\n'
    proxy = await make_proxy({"default": TENANT}, proxy_toml=toml)
    assert compacted(await post(proxy, conversation(50), "before"))
    own_redis.pause()
    try:
        with capture_logs() as logs:
            for n in range(3):  # never waiting on the hung server for good: a hang fails the test
                assert compacted(await asyncio.wait_for(post(proxy, conversation(50 + n), f"during-{n}"), DEADLINE))
    finally:
        own_redis.resume()
    (outage,) = [e for e in logs if e["event"] == "store.unreachable"]
    assert "TimeoutError" in outage["error"]
    assert [e["saved"] for e in logs if e["event"] == "compaction"] == [False] * 3
    await reachable_again(proxy)
    calls = summaries.calls
    assert compacted(await post(proxy, conversation(50), "before"))  # on the checkpoint saved before the hang
    assert summaries.calls == calls

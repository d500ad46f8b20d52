"""A compaction's lease is short but renewed while the summariser runs, so a slow summary is not
taken over by the session's next request: that request waits and uses the one new checkpoint."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
from multidict import CIMultiDict
from structlog.testing import capture_logs

from ctxproxy.compaction.single_flight import lease_ttl
from ctxproxy.config.models import CompactionConfig
from ctxproxy.services import TASKS
from tests.conftest import MakeProxy, Proxy, Upstream

SUMMARY_TIMEOUT = 4.0
SUMMARY_DELAY = 2.5  # several lease lifetimes, within summary_timeout
TENANT = f"""
default_context_window = 3200  # the summary (range, prompts, answer) fits one call
[upstream]
base_url = "{{upstream}}"
[compaction]
strategy = "cut_point"
summarizer = "llm"
summary_timeout = {SUMMARY_TIMEOUT}
summary_max_tokens = 200
[compaction.cut_point]
reserve_tokens = 500
keep_recent_tokens = 800
"""


def over_the_window() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful travel agent."}]
    for n in range(1, 50):
        leg = f"Leg {n}: the train from city {n} leaves at {n % 12 + 6}:10 from platform {n}; seat {n}A is booked."
        messages += [{"role": "user", "content": leg}, {"role": "assistant", "content": "echo: " + leg}]
    return messages + [{"role": "user", "content": "Which seat do I have on leg 3?"}]


async def post(http: aiohttp.ClientSession, proxy: Proxy) -> CIMultiDict[str]:
    body = {"model": "m", "messages": over_the_window()}
    async with http.post(proxy.url("/v1/chat/completions"), json=body, headers={"X-Session-Id": "slow"}) as resp:
        assert resp.status == 200, await resp.text()
        return CIMultiDict(resp.headers)


async def test_a_slow_summariser_keeps_its_lease_and_the_next_request_waits_for_its_checkpoint(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    lease = lease_ttl(CompactionConfig(summary_timeout=SUMMARY_TIMEOUT))
    assert lease * 2 < SUMMARY_DELAY < SUMMARY_TIMEOUT  # unrenewed, the lease would run out twice
    proxy = await make_proxy({"default": TENANT})
    upstream.fake.reply_delay(SUMMARY_DELAY)  # the first summary call
    with capture_logs() as logs:
        async with aiohttp.ClientSession() as http:
            first = asyncio.create_task(post(http, proxy))
            deadline = time.monotonic() + 10
            while not upstream.fake.chat_requests():  # the first request holds the lease, summarising
                assert time.monotonic() < deadline, "the summary call never came"
                await asyncio.sleep(0.01)
            second = await post(http, proxy)
            made = await first
            await proxy.server.app[TASKS].drain(5)
    assert len(upstream.fake.chat_requests()) == 3  # one summary, two answers
    assert made["X-Ctx-Compacted"] == "1"
    assert "X-Ctx-Compacted" not in second  # it waited for the holder instead of taking over
    assert second["X-Ctx-Summarized"] == made["X-Ctx-Summarized"]
    assert not [e for e in logs if e["event"] in ("store.lease_taken_over", "store.lease_lost")]
    assert len([e for e in logs if e["event"] == "compaction"]) == 1

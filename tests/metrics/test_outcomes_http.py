"""What the journey of a request did, counted once it ends: overflow retries and their outcome,
recovery compactions, ctxproxy's tool calls (and the ``X-Ctx-Tool-Rounds`` header), memories
injected, store failures."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai

from ctxproxy.services import RECORDER, STORE
from ctxproxy.session import SessionKey
from ctxproxy.store.keys import session_history_key
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.metrics.scrape import scrape
from tests.recall.paged import PAGED_TENANT, paged_history
from tests.recall.test_memory_http import DECISION, QUESTION
from tests.recall.test_memory_http import tenant as memory_tenant
from tests.recall.test_paged_recall_http import recall
from tests.recovery.test_overflow_retry import OVERFLOW, TENANT, history


async def post(proxy: Proxy, body: dict[str, Any]) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
        await resp.read()
        return resp.status, resp.headers


async def test_an_overflow_recovered_by_a_retry(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": TENANT.format(window=100_000, strategy="none")})
    upstream.fake.reply_error(400, OVERFLOW)
    status, headers = await post(proxy, {"model": "m", "messages": history(30)})
    assert status == 200 and headers["X-Ctx-Retried"] == "1" and headers["X-Ctx-Compacted"] == "1"
    metrics = await scrape(proxy.url("/metrics"))
    assert metrics.total("ctxproxy_overflow_retries_total", tenant="default", outcome="recovered") == 1
    assert metrics.total("ctxproxy_overflow_retries_total") == 1
    assert metrics.total("ctxproxy_compactions_total", kind="recovery", strategy="none", mode="inline") == 1
    assert metrics.total("ctxproxy_compactions_total") == 1
    # Counted as the retried answer's headers say.
    after = metrics.total("ctxproxy_prompt_tokens_total", stage="after")
    assert after == int(headers["X-Ctx-Tokens-After"]) < int(headers["X-Ctx-Tokens-Before"])
    assert metrics.total("ctxproxy_upstream_first_byte_seconds_count") == 2  # the refused attempt, the retry
    # The session's history line, which the inspector charts, says the same.
    await proxy.server.app[RECORDER].flush()
    key = SessionKey("default", headers["X-Ctx-Session"], "derived")
    [line] = await proxy.server.app[STORE].get(session_history_key(key))
    assert line["compacted"] is True and line["retried"] is True and line["after"] == after


async def test_an_overflow_refused_again_or_not_retried(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": TENANT.format(window=100_000, strategy="none")})
    upstream.fake.reply_error(400, OVERFLOW)
    upstream.fake.reply_error(400, OVERFLOW)
    status, _ = await post(proxy, {"model": "m", "messages": history(30)})
    assert status == 400
    strict = await make_proxy({"default": TENANT.format(window=100_000, strategy="none") + "overflow_retries = 0\n"})
    upstream.fake.reply_error(400, OVERFLOW)
    assert (await post(strict, {"model": "m", "messages": history(30)}))[0] == 400

    metrics = await scrape(proxy.url("/metrics"))
    assert metrics.total("ctxproxy_overflow_retries_total", outcome="refused_again") == 1
    assert metrics.total("ctxproxy_requests_total", route="/v1/chat/completions", status="400") == 1
    # ctxproxy answered with an error of its own: no X-Ctx-Tokens-* headers, nothing counted.
    assert metrics.total("ctxproxy_prompt_tokens_total") == 0
    other = await scrape(strict.url("/metrics"))
    assert other.total("ctxproxy_overflow_retries_total", outcome="disabled") == 1
    assert other.total("ctxproxy_compactions_total") == 0


async def test_proxy_tool_rounds_header_and_calls(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    upstream.fake.reply_json(tool_calls=[recall(1), recall(2)])
    upstream.fake.reply_json(tool_calls=[recall(3)])
    upstream.fake.reply_json("Your locker code is 4417.")
    status, headers = await post(proxy, {"model": "gpt-4o-mini", "messages": paged_history()})
    assert status == 200 and headers["X-Ctx-Tool-Rounds"] == "2"

    upstream.fake.reply_json("No tools needed.")
    status, headers = await post(proxy, {"model": "gpt-4o-mini", "messages": paged_history()})
    assert status == 200 and "X-Ctx-Tool-Rounds" not in headers

    # Streamed: the headers leave before the rounds are known; the calls are counted all the same.
    upstream.fake.reply_stream(tool_calls=[recall(2)])
    upstream.fake.reply_stream(["Standup ", "is at 9:30."])
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    async with client.chat.completions.with_streaming_response.create(
        model="gpt-4o-mini",
        messages=paged_history(),  # type: ignore[arg-type]
        stream=True,
    ) as resp:
        assert "X-Ctx-Tool-Rounds" not in resp.headers
        text = "".join([c.choices[0].delta.content or "" async for c in await resp.parse() if c.choices])
    await client.close()
    assert text == "Standup is at 9:30."

    metrics = await scrape(proxy.url("/metrics"))
    assert metrics.total("ctxproxy_proxy_tool_calls_total", tenant="default", tool="recall_page") == 4
    assert metrics.total("ctxproxy_proxy_tool_calls_total", tool="search_memory") == 0  # there at 0, never called


async def test_memories_injected_as_the_header_says(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": memory_tenant()})
    async with aiohttp.ClientSession() as http:
        memories = 0
        for messages in (DECISION, QUESTION, QUESTION):
            body = {"model": "m", "messages": messages, "user": "alice"}
            async with http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
                assert resp.status == 200
                memories += int(resp.headers.get("X-Ctx-Memories", 0))
    assert memories > 0
    metrics = await scrape(proxy.url("/metrics"))
    assert metrics.total("ctxproxy_memories_injected_total", tenant="default") == memories


async def test_store_failures_are_counted_by_operation(proxy: Proxy, upstream: Upstream) -> None:
    await proxy.server.app[STORE].close()
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url("/readyz")) as resp:
            assert resp.status == 503
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "user": "alice"}
        async with http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
            assert resp.status == 200  # a failing store never fails the request
    metrics = await scrape(proxy.url("/metrics"))
    assert metrics.total("ctxproxy_store_errors_total", op="check_writable") == 1
    assert metrics.total("ctxproxy_store_errors_total") >= 1
    assert metrics.label_values("ctxproxy_store_errors_total", "op") <= {
        "get", "put", "delete", "update", "update_many", "compare_and_set", "keys", "check_writable", "close",
        "lock.acquire", "lock.renew", "lock.release",
    }  # fmt: skip

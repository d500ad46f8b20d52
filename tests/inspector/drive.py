"""A conversation driven through the real proxy with the ``openai`` SDK until it compacts, and
the proxy set-up the inspector tests share: a ``paged`` tenant with memory, behind an admin key."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import openai

from ctxproxy.services import RECORDER
from tests.conftest import MakeProxy, Proxy
from tests.fakes.upstream import FakeUpstream
from tests.recall.paged import FACTS, PAGED_TENANT, RECALL

KEY = "s3cret"
BASIC = {"Authorization": "Basic " + base64.b64encode(f"admin:{KEY}".encode()).decode()}
ADMIN = '[admin]\napi_key = "${ADMIN_KEY}"\n'
TENANT = PAGED_TENANT.replace("enabled = false", "enabled = true")
EVIL = "<script>alert('x')</script>"


async def start(make_proxy: MakeProxy, tenants: Mapping[str, str] | None = None) -> Proxy:
    return await make_proxy(tenants or {"default": TENANT}, proxy_toml=ADMIN, env={"ADMIN_KEY": KEY})


async def converse(
    proxy: Proxy,
    *,
    user: str | None = None,
    session: str | None = None,
    recall: FakeUpstream | None = None,
    facts: Sequence[str] = FACTS,
    after: int = 1,
    turns: int = 30,
) -> tuple[str, list[Mapping[str, str]]]:
    """Send a growing conversation, one request per turn, until a response says it compacted
    (``X-Ctx-Compacted``) and ``after`` more after it (with ``recall``, the upstream first asks
    for archived page 1 with ctxproxy's recall tool), or ``turns`` requests; returns the session
    key and every response's headers."""
    headers = {"X-Session-Id": session} if session else {}
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=0, default_headers=headers)
    messages: list[Any] = [{"role": "system", "content": "You are a helpful assistant."}]
    seen: list[Mapping[str, str]] = []
    async with client:
        for turn in range(turns):
            first = next((i for i, h in enumerate(seen) if "X-Ctx-Compacted" in h), None)
            since = 0 if first is None else len(seen) - first  # requests since the first compaction, it included
            if since == 1 and recall is not None:
                recall.reply_json(tool_calls=[{"function": {"name": RECALL, "arguments": '{"page_index": 1}'}}])
                recall.reply_json("Page 1 says the locker code is 4417.")
            messages.append({"role": "user", "content": f"{facts[turn % len(facts)]} (note {turn + 1})"})
            extra = {"user": user} if user else {}
            raw = await client.chat.completions.with_raw_response.create(model="m", messages=messages, **extra)
            answer = raw.parse().choices[0].message.content
            messages.append({"role": "assistant", "content": answer or ""})
            seen.append(raw.headers)
            if since >= after:
                break
    await proxy.server.app[RECORDER].flush()
    return seen[-1]["X-Ctx-Session"], seen


async def wait_for(check: Any, what: str, deadline: float = 10.0) -> None:
    """Poll ``check()`` (an awaitable factory) until true, or fail naming ``what``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while not await check():
        assert loop.time() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def get(proxy: Proxy, path: str, **kwargs: Any) -> tuple[int, str, aiohttp.ClientResponse]:
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url(path), allow_redirects=False, **kwargs) as resp:
            return resp.status, await resp.text(), resp

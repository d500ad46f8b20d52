"""What the inspector shows is what happened: each request's history line (written when the
pipeline's turn ends, batched) holds the tokens its ``X-Ctx-*`` headers reported, streamed or
not, and a request the upstream refused is recorded too."""

from __future__ import annotations

import aiohttp

from ctxproxy.services import RECORDER, STORE
from ctxproxy.session import SessionKey
from ctxproxy.store.keys import session_history_key, session_record_key
from tests.conftest import MakeProxy, Upstream
from tests.inspector.drive import start
from tests.recall.paged import paged_history
from tests.recovery.test_overflow_retry import OVERFLOW, history
from tests.recovery.test_overflow_retry import TENANT as PLAIN_TENANT


async def test_history_lines_match_the_headers_streamed_or_not(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await start(make_proxy)
    headers = []
    async with aiohttp.ClientSession() as http:
        for turns, stream in ((1, False), (2, True), (3, False), (4, True), (5, True)):
            body = {"model": "m", "messages": paged_history(turns), "stream": stream}
            async with http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
                assert resp.status == 200
                await resp.read()
                headers.append(resp.headers)
    await proxy.server.app[RECORDER].flush()
    store = proxy.server.app[STORE]
    key = SessionKey("default", headers[0]["X-Ctx-Session"], "derived")
    lines = await store.get(session_history_key(key))
    assert [(e["before"], e["after"], e["compacted"], e["retried"]) for e in lines] == [
        (int(h["X-Ctx-Tokens-Before"]), int(h["X-Ctx-Tokens-After"]), "X-Ctx-Compacted" in h, False) for h in headers
    ]
    assert any(e["compacted"] for e in lines)
    assert (await store.get(session_record_key(key)))["requests"] == 5


async def test_a_refused_request_is_recorded_too(make_proxy: MakeProxy, upstream: Upstream) -> None:
    tenant = PLAIN_TENANT.format(window=100_000, strategy="none") + "overflow_retries = 0\n"
    proxy = await start(make_proxy, {"default": tenant})
    upstream.fake.reply_error(400, OVERFLOW)
    async with aiohttp.ClientSession() as http:
        body = {"model": "m", "messages": history(10)}
        async with http.post(proxy.url("/v1/chat/completions"), json=body, headers={"X-Session-Id": "big"}) as resp:
            assert resp.status == 400 and (await resp.json())["error"]["code"] == "context_length_exceeded"
    await proxy.server.app[RECORDER].flush()
    [line] = await proxy.server.app[STORE].get(session_history_key(SessionKey("default", "big", "header")))
    assert line["before"] == line["after"] > 0 and not line["compacted"] and not line["retried"]

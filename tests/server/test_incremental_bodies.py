"""A conversation that goes on over HTTP is parsed from the previous body on
(``ctxproxy.wire.incremental``): what is forwarded is what the client sent, the next request
reuses the previous request's parsed messages, and an invalid body that starts like the previous
one is refused as it always was."""

from __future__ import annotations

import aiohttp
import orjson

from ctxproxy.services import KNOWN
from ctxproxy.session.identity import SessionKey
from ctxproxy.wire.incremental import BODIES
from tests.conftest import MakeProxy, Upstream


def history(turns: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You answer briefly."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"question {turn} " + "words " * 200})
        if turn < turns - 1:
            messages.append({"role": "assistant", "content": f"answer {turn}"})
    return messages


async def test_a_growing_conversation_reuses_the_previous_body(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy()
    url = proxy.url("/v1/chat/completions")
    app = proxy.server.app
    sent, firsts = [], []
    async with aiohttp.ClientSession() as http:
        for turns in (3, 4, 5):
            body = orjson.dumps({"model": "gpt-4o", "messages": history(turns), "temperature": 0.5})
            sent.append(body)
            async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                assert resp.status == 200
                await resp.read()
                key = SessionKey("default", resp.headers["X-Ctx-Session"], "derived")
            known = app[KNOWN].last(key.store_id)
            assert known is not None
            firsts.append(known.messages[0])
        assert firsts[1] is firsts[2]  # the third request reused the second's parsed message
        assert firsts[0] is firsts[1]  # ... as the second did the first's (the fingerprint is its first KiB)
        # A body that repeats the previous one and then breaks is refused as any invalid body is.
        broken = sent[-1][:-1] + b',"messages": oops}'
        async with http.post(url, data=broken, headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"]["code"] == "invalid_json"
    assert [r.body for r in upstream.fake.chat_requests()] == sent
    assert app[BODIES].nbytes > 0

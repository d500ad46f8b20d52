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
from tests.recall.paged import PAGED_TENANT, RECALL, SEARCH, WEATHER, paged_history


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


async def test_a_body_sent_again_gets_the_same_fields_after_its_messages(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """The fields after the messages (here the client's tools, which ctxproxy appends its own to)
    are the previous request's parsed objects when their bytes repeat: what ctxproxy adds goes to
    copies, never into them, so every request forwards the client's tools once, then ctxproxy's."""
    proxy = await make_proxy({"default": PAGED_TENANT})
    tools = [{**WEATHER, "function": {**WEATHER["function"], "description": f"weather {i} " * 50}} for i in range(3)]
    body = orjson.dumps({"model": "gpt-4o", "messages": paged_history(6), "tools": tools, "metadata": {"u": "1"}})
    async with aiohttp.ClientSession() as http:
        for _ in range(3):
            async with http.post(proxy.url("/v1/chat/completions"), data=body) as resp:
                assert resp.status == 200, await resp.text()
    forwarded = [r.json() for r in upstream.fake.chat_requests()]
    names = [[tool["function"]["name"] for tool in sent["tools"]] for sent in forwarded]
    assert names == [["get_weather"] * 3 + [RECALL, SEARCH]] * 3
    assert all(sent["tools"][:3] == tools and sent["metadata"] == {"u": "1"} for sent in forwarded)

"""The Responses WebSocket transport (``GET /v1/responses`` upgraded, as Codex tries first) is relayed
faithfully: messages both ways as they came, the key as on every path; an upstream that does not
upgrade answers the client itself, so the client falls back to HTTP at once."""

from __future__ import annotations

import json

import aiohttp
import pytest

from tests.agent_fixtures import agent_request
from tests.responses.conftest import MODEL, ResponsesRig


async def test_a_socket_is_relayed_both_ways(rig: ResponsesRig) -> None:
    rig.fake.websocket = True
    proxy = await rig.proxy(upstream='api_key = "sk-tenant"')
    create = json.dumps({"type": "response.create", "model": MODEL, "input": "hello over the socket"})
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(proxy.make_url("/v1/responses"), protocols=("responses",),
                                   headers={"Authorization": "Bearer sk-client", "OpenAI-Beta": "responses_websockets=2026-02-06"}) as ws:  # fmt: skip
            assert ws.protocol == "responses"
            await ws.send_str(create)
            events = []
            while not events or events[-1]["type"] != "response.completed":
                events.append(json.loads((await ws.receive()).data))
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "echo: hello over the socket"
    assert rig.fake.socket_messages == [create]
    (opened,) = rig.fake.requests
    assert opened.headers["Authorization"] == "Bearer sk-tenant"
    assert opened.headers["OpenAI-Beta"] == "responses_websockets=2026-02-06"


@pytest.mark.parametrize("path", ["/v1/responses", "/t/default/v1/responses"])
async def test_an_upstream_that_does_not_upgrade_answers_codexs_attempt(rig: ResponsesRig, path: str) -> None:
    proxy = await rig.proxy()
    attempt = agent_request("codex", "websocket")
    headers = attempt.replay_headers(authorization="Bearer sk-codex", connection="Upgrade", upgrade="websocket")
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.make_url(path), headers=headers) as resp:
            assert resp.status == 404  # the upstream's own answer: Codex falls back to POST /v1/responses
    (tried,) = rig.fake.requests
    assert tried.method == "GET" and tried.headers["Upgrade"].lower() == "websocket"
    assert tried.headers["openai-beta"] == attempt.headers["openai-beta"]


async def test_a_plain_get_is_relayed_as_it_is(rig: ResponsesRig) -> None:
    proxy = await rig.proxy()
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.make_url("/v1/responses?limit=2")) as resp:
            assert resp.status == 404
    assert rig.fake.requests[0].query_string == "limit=2"

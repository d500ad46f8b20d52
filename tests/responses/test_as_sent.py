"""A conversation that lives on the server (``previous_response_id``, ``conversation``), or a body
ctxproxy cannot model, goes upstream byte for byte, and the answer says why it was not compacted."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from tests.responses.conftest import MODEL, ResponsesRig
from tests.wire.openai_responses.items import user

LONG = [user(f"Note {n}: " + "the oven runs hot on Mondays. " * 20) for n in range(40)]


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"previous_response_id": "resp_abc"}, "previous_response_id"),
        ({"conversation": {"id": "conv_1"}}, "conversation"),
    ],
)
async def test_server_side_history_is_forwarded_as_sent(
    rig: ResponsesRig, extra: dict[str, object], param: str
) -> None:
    proxy = await rig.proxy(window=1024, strategy="cut_point")  # it would compact, were it compactable
    raw = orjson.dumps({"model": MODEL, "input": LONG, **extra})
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.make_url("/v1/responses"), data=raw, headers={"Content-Type": "application/json"}
        ) as resp:
            assert resp.status == 200
            assert resp.headers["X-Ctx-Forwarded-As-Sent"] == param
            assert "X-Ctx-Compacted" not in resp.headers
    assert rig.fake.response_requests()[0].body == raw


async def test_an_unmodelled_item_sends_the_clients_bytes(rig: ResponsesRig) -> None:
    proxy = await rig.proxy(window=1024, strategy="cut_point")
    raw = b'{"model": "%s",  "input": [{"role": "user", "content": 42}]}' % MODEL.encode()
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.make_url("/v1/responses"), data=raw, headers={"Content-Type": "application/json"}
        ) as resp:
            assert resp.headers["X-Ctx-Forwarded-As-Sent"] == "input[0].content"
            assert resp.status == 400  # the upstream's verdict, relayed
    assert rig.fake.response_requests()[0].body == raw


@pytest.mark.parametrize("body", [b"", b"{not json", b"[]"])
async def test_a_body_that_is_no_json_object_is_a_400_in_openais_shape(rig: ResponsesRig, body: bytes) -> None:
    proxy = await rig.proxy()
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.make_url("/t/default/v1/responses"), data=body) as resp:
            assert resp.status == 400
            error = (await resp.json())["error"]
            assert error["type"] == "invalid_request_error" and error["code"] in ("invalid_json", "invalid_body")
    assert rig.fake.requests == []

"""Gemini's wire at ctxproxy's edge, over raw HTTP: a body goes upstream byte for byte while
nothing is compacted (snake_case, unknown fields and all); a body ctxproxy cannot model is
forwarded as sent; the client's key moves out of the query and never goes upstream in a URL; every
error ctxproxy answers on a Gemini path is Google-shaped."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from ctxproxy.services import KNOWN
from ctxproxy.session.identity import SessionKey
from ctxproxy.wire.gemini.canonical import PART_KEY
from tests.gemini.conftest import CLIENT_KEY, MODEL, TENANT_KEY, GeminiRig

RAW = (
    b'{"contents": [{"role": "user", "parts": [{"text": "Hi"}, {"inline_data": {"mime_type": "image/png", '
    b'"data": "YWJj"}}]}], "system_instruction": {"parts": [{"text": "Be brief"}]}, "safety_settings": [], '
    b'"cachedContent": null, "somethingNew": {"x": 1}, "generation_config": {"max_output_tokens": 20}}'
)


async def send(url: str, raw: bytes, *, method: str = "generateContent", query: str = "", **headers: str) -> Any:
    async with aiohttp.ClientSession() as http:
        target = f"{url}/v1beta/models/{MODEL}:{method}" + (f"?{query}" if query else "")
        async with http.post(target, data=raw, headers={"Content-Type": "application/json", **headers}) as resp:
            return resp.status, resp.headers, await resp.read()


async def test_an_uncompacted_body_goes_upstream_byte_for_byte(rig: GeminiRig) -> None:
    proxy = await rig.proxy()
    status, _, answer = await send(str(proxy.make_url("")), RAW, **{"x-goog-api-key": CLIENT_KEY})
    assert status == 200, answer
    assert rig.fake.generate_requests()[0].body == RAW


async def test_a_body_ctxproxy_cannot_model_is_forwarded_as_sent(rig: GeminiRig) -> None:
    proxy = await rig.proxy()
    raw = b'{"contents": [{"role": "function", "parts": [{"text": "Hi"}]}]}'
    status, headers, _ = await send(str(proxy.make_url("")), raw, **{"x-goog-api-key": CLIENT_KEY})
    assert status == 400 and headers["X-Ctx-Forwarded-As-Sent"] == "contents[0]"  # the upstream's refusal, relayed
    assert rig.fake.generate_requests()[0].body == raw


@pytest.mark.parametrize("tenant_key", [True, False], ids=["tenant_key", "client_key"])
async def test_a_key_in_the_query_never_goes_upstream_in_a_url(rig: GeminiRig, tenant_key: bool) -> None:
    proxy = await rig.proxy(upstream=f'api_key = "{TENANT_KEY}"' if tenant_key else "")
    url = str(proxy.make_url(""))
    status, _, answer = await send(url, RAW, method="streamGenerateContent", query=f"alt=sse&key={CLIENT_KEY}")
    assert status == 200 and b"echo: Hi" in answer
    async with aiohttp.ClientSession() as http:  # a relayed path too
        async with http.get(f"{url}/v1beta/models/{MODEL}?key={CLIENT_KEY}&pageSize=2") as resp:
            assert resp.status == 404  # the fake serves no model listing; what matters is what it got
    generate, listing = rig.fake.requests
    assert generate.query_string == "alt=sse" and listing.query_string == "pageSize=2"
    for request in (generate, listing):
        assert request.headers["x-goog-api-key"] == (TENANT_KEY if tenant_key else CLIENT_KEY)


async def test_no_key_reaches_a_log_line(rig: GeminiRig) -> None:
    proxy = await rig.proxy(upstream="")
    with capture_logs() as logs:
        status, _, _ = await send(str(proxy.make_url("")), RAW, query=f"key={CLIENT_KEY}")
        await send(str(proxy.make_url("")), RAW, method="countTokens", query=f"key={CLIENT_KEY}")
    assert status == 200 and logs and CLIENT_KEY not in str(logs)


async def test_errors_are_google_shaped(rig: GeminiRig) -> None:
    locked = f'api_keys = ["proxy-key"]\n[upstream]\nbase_url = "{rig.upstream_url}"\napi_key = "k"\n'
    proxy = await rig.proxy(tenants={"locked": locked})
    url = str(proxy.make_url(""))
    status, _, answer = await send(url, b"{not json", **{"x-goog-api-key": CLIENT_KEY})
    assert status == 400 and _shape(answer) == (400, "INVALID_ARGUMENT")
    status, _, answer = await send(url + "/t/nobody", RAW)
    assert status == 404 and _shape(answer) == (404, "NOT_FOUND")
    status, _, answer = await send(url + "/t/locked", RAW, **{"x-goog-api-key": "wrong"})
    assert status == 401 and _shape(answer) == (401, "UNAUTHENTICATED")
    status, _, answer = await send(url + "/t/locked", RAW, method="countTokens", query="key=wrong")
    assert status == 401 and _shape(answer) == (401, "UNAUTHENTICATED")
    await rig.server.close()  # the upstream is gone
    status, _, answer = await send(url, RAW, **{"x-goog-api-key": CLIENT_KEY})
    assert status == 502 and _shape(answer) == (502, "UNAVAILABLE")


def _shape(answer: bytes) -> tuple[int, str]:
    error = json.loads(answer)["error"]
    assert set(error) == {"code", "message", "status"} and error["message"]
    return error["code"], error["status"]


async def test_a_conversation_that_goes_on_is_parsed_from_the_previous_body_on(rig: GeminiRig) -> None:
    """Each body repeats the previous one up to its last content: only the tail is parsed
    (``ctxproxy.wire.incremental``, keyed on ``contents``), so a repeated content is the previous
    request's parsed object; every body goes upstream as sent."""
    proxy = await rig.proxy()
    url = str(proxy.make_url(""))
    signed = {"role": "model", "parts": [{"text": "Yo", "thoughtSignature": "c2ln"}]}
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "Hi " + "words " * 300}]}, signed]
    sent, parts = [], []
    for turn in range(3):
        contents.append({"role": "user", "parts": [{"text": f"And {turn}?"}]})
        raw = json.dumps({"contents": contents, "generationConfig": {"temperature": 0}}).encode()
        sent.append(raw)
        status, headers, answer = await send(url, raw, **{"x-goog-api-key": CLIENT_KEY})
        assert status == 200, answer
        known = proxy.app[KNOWN].last(SessionKey("default", headers["X-Ctx-Session"], "derived").store_id)
        assert known is not None
        parts.append(known.messages[1]["content"][0][PART_KEY])
        contents.append({"role": "model", "parts": [{"text": f"Answer {turn}"}]})
    assert parts[0] == signed["parts"][0]
    assert parts[1] is parts[0] and parts[2] is parts[1]  # the client's part, parsed once
    assert [r.body for r in rig.fake.generate_requests()] == sent

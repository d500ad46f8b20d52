"""The real ``google-genai`` SDK through ctxproxy, pointed at it by base URL only: generate,
stream, a function-calling round trip and a chat session reach the fake upstream as the SDK sent
them, with the tenant's key in place of the client's."""

from __future__ import annotations

from typing import Any

from google import genai
from google.genai import types

from tests.gemini.conftest import CLIENT_KEY, MODEL, TENANT_KEY, GeminiRig


def _no_client_key(rig: GeminiRig) -> None:
    for request in rig.fake.requests:
        assert request.headers["x-goog-api-key"] == TENANT_KEY
        assert CLIENT_KEY not in request.query_string and CLIENT_KEY not in str(dict(request.headers))


async def test_generate(rig: GeminiRig) -> None:
    proxy = await rig.proxy()
    config = types.GenerateContentConfig(system_instruction="Be brief", max_output_tokens=50, temperature=0.2)
    answer = await rig.client(proxy).models.generate_content(model=MODEL, contents="Hi there", config=config)
    assert answer.text == "echo: Hi there"
    assert answer.usage_metadata.prompt_token_count > 0
    (request,) = rig.fake.generate_requests()
    assert request.path == f"/v1beta/models/{MODEL}:generateContent"  # the SDK's /v1, the tenant's /v1beta
    body = request.json()
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief"}], "role": "user"}
    assert body["generationConfig"] == {"temperature": 0.2, "maxOutputTokens": 50}
    _no_client_key(rig)


async def test_stream(rig: GeminiRig) -> None:
    proxy = await rig.proxy()
    rig.fake.reply("Hello there", pieces=["Hel", "lo ", "there"])
    chunks = [c async for c in await rig.client(proxy).models.generate_content_stream(model=MODEL, contents="Hi")]
    assert [c.text for c in chunks] == ["Hel", "lo ", "there"]
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    (request,) = rig.fake.generate_requests()
    assert request.path.endswith(":streamGenerateContent") and request.query_string == "alt=sse"
    _no_client_key(rig)


def lookup(q: str) -> str:
    """Look something up in the bakery's records."""
    return f"records for {q}: 12 loaves"


async def test_function_calling_round_trip(rig: GeminiRig) -> None:
    """Automatic function calling: the model's call (with its thought signature) and the SDK's
    response go back in the second request exactly as the SDK wrote them."""
    proxy = await rig.proxy()
    rig.fake.reply(calls=[{"name": "lookup", "args": {"q": "rye"}, "thoughtSignature": "c2lnbmF0dXJl"}])
    rig.fake.reply("12 loaves of rye")
    chat = rig.client(proxy).chats.create(model=MODEL, config=types.GenerateContentConfig(tools=[lookup]))
    answer = await chat.send_message("How much rye?")
    assert answer.text == "12 loaves of rye"
    first, second = (r.json() for r in rig.fake.generate_requests())
    contents = second["contents"]
    assert contents[0] == first["contents"][0]
    assert contents[1]["parts"] == [
        {"functionCall": {"args": {"q": "rye"}, "name": "lookup"}, "thoughtSignature": "c2lnbmF0dXJl"}
    ]
    response = contents[2]["parts"][0]["functionResponse"]
    assert response == {"name": "lookup", "response": {"result": "records for rye: 12 loaves"}}
    _no_client_key(rig)


async def test_chat_session(rig: GeminiRig) -> None:
    proxy = await rig.proxy()
    chat = rig.client(proxy).chats.create(model=MODEL)
    assert (await chat.send_message("one")).text == "echo: one"
    assert (await chat.send_message("two")).text == "echo: two"
    last = rig.fake.generate_requests()[-1].json()["contents"]
    assert [(c["role"], c["parts"][0]["text"]) for c in last] == [
        ("user", "one"),
        ("model", "echo: one"),
        ("user", "two"),
    ]


async def test_count_tokens_relayed(rig: GeminiRig) -> None:
    proxy = await rig.proxy()
    counted = await rig.client(proxy).models.count_tokens(model=MODEL, contents="Hi there")
    assert counted.total_tokens == rig.fake.prompt_tokens(
        {"contents": [{"role": "user", "parts": [{"text": "Hi there"}]}]}
    )
    (request,) = rig.fake.requests
    assert request.path == f"/v1beta/models/{MODEL}:countTokens"
    _no_client_key(rig)


async def test_tenant_path_and_v1beta(rig: GeminiRig) -> None:
    """The same under ``/t/<tenant>`` and with the SDK's ``v1beta``."""
    other = f'\n[upstream]\nbase_url = "{rig.upstream_url}"\napi_key = "other-key"\n'
    proxy = await rig.proxy(tenants={"team": other})
    client: Any = rig.client(proxy, "/t/team")
    options = {"base_url": str(proxy.make_url("/t/team")), "api_version": "v1beta"}
    beta = genai.Client(api_key=CLIENT_KEY, http_options=options).aio
    assert (await client.models.generate_content(model=MODEL, contents="a")).text == "echo: a"
    assert (await beta.models.generate_content(model=MODEL, contents="b")).text == "echo: b"
    assert [r.headers["x-goog-api-key"] for r in rig.fake.requests] == ["other-key", "other-key"]

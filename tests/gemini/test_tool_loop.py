"""ctxproxy's tools on Gemini's wire, beyond the scenario suite's recall: an answer that calls the
client's function too goes to the client without ours; a streamed round of ours is never shown and
the stream ends with one finishing chunk carrying the usage of every round; the round after the
last turns function calling off; a request with function calling off is offered nothing."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from tests.gemini.conftest import CLIENT_KEY, MODEL, GeminiRig
from tests.protocols.conversation import SYSTEM, conversation
from tests.protocols.test_strategies import PAGED
from tests.recall.paged import RECALL

TOOLS = [{"functionDeclarations": [{"name": "lookup", "description": "Look it up.", "parameters": {"type": "object"}}]}]


def body(**extra: Any) -> dict[str, Any]:
    contents = [
        {"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
        for m in conversation(8)
    ]
    return {"contents": contents, "systemInstruction": {"parts": [{"text": SYSTEM}]}, "tools": TOOLS, **extra}


async def post(rig: GeminiRig, payload: dict[str, Any], stream: bool = False, extra: str = "") -> tuple[int, bytes]:
    proxy = await rig.proxy(strategy="paged", extra=PAGED + extra)
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    async with aiohttp.ClientSession() as http:
        url = str(proxy.make_url(f"/v1beta/models/{MODEL}:{method}"))
        async with http.post(url, json=payload, headers={"x-goog-api-key": CLIENT_KEY}) as resp:
            return resp.status, await resp.read()


def chunks(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in raw.decode().splitlines() if line.startswith("data:")]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_an_answer_calling_the_clients_function_too_goes_to_the_client_without_ours(
    rig: GeminiRig, stream: bool
) -> None:
    rig.fake.reply(calls=[{"name": RECALL, "args": {"page_index": 1}}, {"name": "lookup", "args": {"q": "rye"}}])
    status, raw = await post(rig, body(), stream=stream)
    assert status == 200, raw
    answers = chunks(raw) if stream else [json.loads(raw)]
    parts = [p for a in answers for p in a["candidates"][0]["content"]["parts"]]
    assert [p["functionCall"]["name"] for p in parts if "functionCall" in p] == ["lookup"]
    assert len(rig.fake.generate_requests()) == 1


async def test_a_streamed_round_of_ours_is_never_shown(rig: GeminiRig) -> None:
    rig.fake.reply(text="Let me look.", calls=[{"name": RECALL, "args": {"page_index": 1}}])
    rig.fake.reply("Order 1 had 3 loaves.", pieces=["Order 1 ", "had 3 loaves."])
    status, raw = await post(rig, body(), stream=True)
    assert status == 200, raw
    events = chunks(raw)
    assert RECALL not in raw.decode()
    text = "".join(p.get("text", "") for e in events for p in e["candidates"][0]["content"]["parts"])
    assert text == "Let me look.Order 1 had 3 loaves."
    finishing = [e for e in events if e["candidates"][0].get("finishReason")]
    assert finishing == [events[-1]]  # one finish, at the end
    first, second = (r.json() for r in rig.fake.generate_requests())
    prompts = rig.fake.prompt_tokens(first) + rig.fake.prompt_tokens(second)
    assert events[-1]["usageMetadata"]["promptTokenCount"] == prompts  # summed over both rounds
    answered = second["contents"][-1]["parts"][0]["functionResponse"]
    assert answered["name"] == RECALL and answered["response"]["output"].startswith("## Page #1")


async def test_the_round_after_the_last_turns_function_calling_off(rig: GeminiRig) -> None:
    rig.fake.reply(calls=[{"name": RECALL, "args": {"page_index": 1}}])
    rig.fake.reply("done")
    config = {"function_calling_config": {"mode": "AUTO"}}
    status, _ = await post(rig, body(tool_config=config), extra="[tools]\nmax_rounds = 1\n")
    assert status == 200
    last = rig.fake.generate_requests()[-1].json()
    assert last["tool_config"] == {"function_calling_config": {"mode": "NONE"}} and "toolConfig" not in last


@pytest.mark.parametrize("config", [{"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}},
                                    {"cachedContent": "cachedContents/abc"}], ids=["calling_off", "cached"])  # fmt: skip
async def test_a_request_that_declines_tools_is_offered_none(rig: GeminiRig, config: dict[str, Any]) -> None:
    status, _ = await post(rig, body(**config))
    assert status == 200
    assert rig.fake.generate_requests()[-1].json()["tools"] == TOOLS

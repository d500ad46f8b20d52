"""An upstream that refuses the prompt as too long — a JSON 400, an ``error`` event or a
``response.failed`` event before any output — gets one compacted retry; one after output is
relayed as it came. And the answer's usage teaches ctxproxy how the upstream counts."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from tests.fakes.responses_checks import check_request
from tests.responses.conftest import MODEL, ResponsesRig
from tests.wire.openai_responses.items import codex_turns, developer, user

INPUT = [developer("You are a coding agent."), *codex_turns(12), user("Which log had the most errors?")]
LIMIT = 900


@pytest.mark.parametrize("refusal", ["json", "error", "failed"])
async def test_an_overflow_before_output_is_compacted_and_retried(rig: ResponsesRig, refusal: str) -> None:
    proxy = await rig.proxy(window=1_000_000)  # ctxproxy thinks it fits: only the upstream knows better
    stream = refusal != "json"
    if stream:
        rig.fake.reply_refusal_in_stream(failed=refusal == "failed")
    else:
        rig.fake.window = LIMIT
    client = rig.client(proxy)
    if stream:
        async with client.responses.with_streaming_response.create(model=MODEL, input=INPUT, stream=True) as resp:
            events = [event async for event in await resp.parse()]
            headers = resp.headers
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert [e.type for e in events if e.type in ("error", "response.failed")] == []
    else:
        raw = await client.responses.with_raw_response.create(model=MODEL, input=INPUT)
        text, headers = raw.parse().output_text, raw.headers
    assert headers["X-Ctx-Retried"] == "1" and text == "echo: Which log had the most errors?"
    refused, retried = (orjson.loads(r.body) for r in rig.fake.response_requests())
    assert refused["input"] == INPUT
    assert len(retried["input"]) < len(INPUT) and retried["input"][0] == INPUT[0] and retried["input"][-1] == INPUT[-1]
    assert check_request(retried) is None


async def test_an_overflow_after_output_is_relayed_not_retried(rig: ResponsesRig) -> None:
    proxy = await rig.proxy()
    gate = asyncio.Event()
    rig.fake.reply_refusal_in_stream(after_pieces=["Partial "], gate=gate, failed=True)
    seen: list[str] = []
    async with rig.client(proxy).responses.with_streaming_response.create(
        model=MODEL, input=INPUT, stream=True
    ) as resp:
        async for event in await resp.parse():
            seen.append(event.type)
            if event.type == "response.output_text.delta":
                gate.set()
    assert seen[-1] == "response.failed" and "response.output_text.delta" in seen
    assert len(rig.fake.response_requests()) == 1


async def test_a_stream_cut_short_ends_with_an_error_event(rig: ResponsesRig) -> None:
    from tests.fakes.serving import Ending

    proxy = await rig.proxy()
    rig.fake.reply("Hello there", pieces=["Hello ", "there"], ending=Ending(end_after=5))
    async with rig.client(proxy).responses.with_streaming_response.create(model=MODEL, input="hi", stream=True) as resp:
        events = [event async for event in await resp.parse()]
    assert events[-1].type == "error" and events[-1].code == "upstream_stream_truncated"
    assert events[-1].sequence_number == events[-2].sequence_number + 1

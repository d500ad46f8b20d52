"""When a round of the Messages tool loop fails: round 1's overflow is compacted and retried by the
pipeline; a later round's is sent once more with ctxproxy's answers withdrawn, then refused with an
``invalid_request_error``; other upstream errors reach the client as they came (JSON), or as an
``error`` event that ends its stream — as does a later round cut short. In a stream, an overflow
``error`` event after ``message_start`` and ``ping`` (no content yet) is an overflow of its round,
in every round (``ctxproxy.upstream.opening``); the fake paces those events (``PACE``) so that
they reach the proxy in reads of their own."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from ctxproxy.tools.budget import NO_ROOM
from ctxproxy.tools.progress import LATER_OVERFLOW
from ctxproxy.wire.anthropic.relay import TRUNCATED
from tests.anthropic.conftest import MODEL, Claude, MakeProxy, check_shape
from tests.anthropic.paged import history, paged_client, recall, results
from tests.fakes.anthropic_upstream import anthropic_error
from tests.fakes.anthropic_wire import reported

TOO_LONG = "prompt is too long: 210000 tokens > 200000 maximum"
PACE = 0.05  # seconds between the events of a refused stream's opening
LONG = " We walked through the rest of the plan, step by step, and wrote every detail down." * 6


async def streamed_until_error(client: anthropic.AsyncAnthropic) -> tuple[str, tuple[str, str]]:
    """The text a stream of ``history()`` showed before it ended in an error event, and that error."""
    seen: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as raised:
        async with client.messages.stream(model=MODEL, max_tokens=200, messages=history()) as stream:
            async for piece in stream.text_stream:
                seen.append(piece)
    return "".join(seen), reported(raised.value)


async def test_a_later_round_that_overflows_is_sent_again_without_the_answers(
    make_proxy: MakeProxy, claude: Claude
) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_json("Looking.", tool_uses=[recall(1)])
    claude.fake.reply_error(400, anthropic_error(TOO_LONG))
    claude.fake.reply_json("I could not read the page.")
    message = await client.messages.create(model=MODEL, max_tokens=200, messages=history())
    assert [b.text for b in message.content] == ["Looking.", "I could not read the page."]
    refused, withdrawn = (r.json() for r in claude.fake.message_requests()[1:])
    assert "## Page #1" in results(refused["messages"][-1])[0]["content"]
    assert [r["content"] for r in results(withdrawn["messages"][-1])] == [NO_ROOM]
    assert withdrawn["tool_choice"] == {"type": "none"} and withdrawn["messages"][:-1] == refused["messages"][:-1]
    check_shape(withdrawn)


async def test_a_later_round_that_overflows_twice_is_an_invalid_request(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_json(tool_uses=[recall(1)])
    claude.fake.reply_error(400, anthropic_error(TOO_LONG))
    claude.fake.reply_error(400, anthropic_error(TOO_LONG))
    with pytest.raises(anthropic.BadRequestError) as raised:
        await client.messages.create(model=MODEL, max_tokens=200, messages=history())
    assert reported(raised.value) == ("invalid_request_error", LATER_OVERFLOW)
    assert len(claude.fake.message_requests()) == 3


async def test_a_streamed_later_round_that_overflows_twice_ends_in_an_error_event(
    make_proxy: MakeProxy, claude: Claude
) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_stream(["Looking."], tool_uses=[recall(1)])
    claude.fake.reply_sse_error("invalid_request_error", TOO_LONG)  # an error event opening the stream
    claude.fake.reply_error(400, anthropic_error(TOO_LONG))
    assert await streamed_until_error(client) == ("Looking.", ("invalid_request_error", LATER_OVERFLOW))
    assert [r["content"] for r in results(claude.fake.message_requests()[2].json()["messages"][-1])] == [NO_ROOM]


async def test_a_streamed_later_round_overflow_after_its_opening_is_withdrawn(
    make_proxy: MakeProxy, claude: Claude
) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_stream(["Looking."], tool_uses=[recall(1)])
    claude.fake.reply_sse_error("invalid_request_error", TOO_LONG, ping=True, delay=PACE)
    claude.fake.reply_stream(["No room ", "to read it."])
    async with client.messages.stream(model=MODEL, max_tokens=200, messages=history()) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "Looking.No room to read it." and final.stop_reason == "end_turn"
    assert [r["content"] for r in results(claude.fake.message_requests()[2].json()["messages"][-1])] == [NO_ROOM]


async def test_a_streamed_later_round_overflow_withdrawn_once_answers(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_stream(["Looking."], tool_uses=[recall(1)])
    claude.fake.reply_error(400, anthropic_error(TOO_LONG))
    claude.fake.reply_stream(["No room ", "to read it."])
    async with client.messages.stream(model=MODEL, max_tokens=200, messages=history()) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "Looking.No room to read it." and final.stop_reason == "end_turn"
    assert [b.type for b in final.content] == ["text", "text"]


async def test_an_overflow_of_round_one_is_compacted_and_retried(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    refusal = "prompt is too long"  # no numbers: the retry is compacted to 70 % of what was sent
    claude.fake.reply_error(400, anthropic_error(refusal))
    claude.fake.reply_json(tool_uses=[recall(1)])
    claude.fake.reply_json("4417.")
    raw = await client.messages.with_raw_response.create(model=MODEL, max_tokens=200, messages=history(8, LONG))
    assert (await raw.parse()).content[0].text == "4417."
    assert raw.headers["X-Ctx-Retried"] == "1" and len(claude.fake.message_requests()) == 3


@pytest.mark.parametrize("opening", [{}, {"ping": True, "delay": PACE}], ids=["together", "paced_after_ping"])
async def test_an_overflow_event_opening_round_one_is_compacted_and_retried(
    make_proxy: MakeProxy, claude: Claude, opening: dict[str, Any]
) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_sse_error("invalid_request_error", "prompt is too long", **opening)
    claude.fake.reply_stream(tool_uses=[recall(1)])
    claude.fake.reply_stream(["44", "17."])
    async with client.messages.stream(model=MODEL, max_tokens=200, messages=history(8, LONG)) as stream:
        text = "".join([piece async for piece in stream.text_stream])
    assert text == "4417." and stream.response.headers["X-Ctx-Retried"] == "1"
    refused, retried, answered = (r.json() for r in claude.fake.message_requests())
    assert len(str(retried["messages"])) < len(str(refused["messages"]))
    assert "## Page #1" in results(answered["messages"][-1])[0]["content"]


async def test_another_error_of_a_later_round_is_relayed(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_json(tool_uses=[recall(1)])
    claude.fake.reply_error(529, anthropic_error("Overloaded", "overloaded_error"))
    with pytest.raises(anthropic.APIStatusError) as raised:
        await client.messages.create(model=MODEL, max_tokens=200, messages=history())
    assert raised.value.status_code == 529 and reported(raised.value) == ("overloaded_error", "Overloaded")


async def test_a_streamed_later_rounds_error_ends_the_stream(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_stream(["Looking."], tool_uses=[recall(1)])
    claude.fake.reply_error(529, anthropic_error("Overloaded", "overloaded_error"))
    with pytest.raises(anthropic.APIStatusError) as raised:
        async with client.messages.stream(model=MODEL, max_tokens=200, messages=history()) as stream:
            await stream.until_done()
    assert reported(raised.value) == ("overloaded_error", "Overloaded")


async def test_a_later_round_cut_short_ends_in_an_error_event(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_stream(["Looking."], tool_uses=[recall(1)])
    claude.fake.reply_stream(["Your ", "code ", "is ", "4417."], end_after=5)  # ends cleanly, mid-answer
    assert await streamed_until_error(client) == ("Looking.Your code ", ("api_error", TRUNCATED))

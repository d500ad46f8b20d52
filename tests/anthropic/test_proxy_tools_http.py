"""ctxproxy's tools for Messages clients, JSON answers: the model recalls an archived page with
``ctxproxy_recall_page``, ctxproxy answers it, and the client — the real ``anthropic`` SDK, sync and
async — gets only the final message, never a ``tool_use`` of ours."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from tests.anthropic.conftest import MODEL, Claude, MakeProxy, check_shape
from tests.anthropic.paged import (
    RECALL,
    SEARCH,
    SYSTEM,
    WEATHER,
    history,
    paged_client,
    recall,
    results,
    sync_client,
    tool_uses,
)
from tests.logs.lines import capture, request_lines
from tests.metrics.scrape import scrape


def usage(inputs: int, output: int, read: int = 0, written: int = 0) -> dict[str, int]:
    return {
        "input_tokens": inputs,
        "output_tokens": output,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
    }


async def test_a_recall_is_answered_by_the_proxy(make_proxy: MakeProxy, claude: Claude) -> None:
    client, url = await paged_client(make_proxy, claude)
    claude.fake.reply_json("Let me look.", tool_uses=[recall(1, id="toolu_r1")], usage=usage(100, 12, read=64))
    claude.fake.reply_json("Your locker code is 4417.", usage=usage(150, 8, read=96, written=10))
    raw = await client.messages.with_raw_response.create(model=MODEL, max_tokens=200, system=SYSTEM, messages=history())
    message = await raw.parse()

    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [
        ("text", "Let me look."),
        ("text", "Your locker code is 4417."),
    ]
    assert message.stop_reason == "end_turn" and message.id == "msg_fake0002"
    assert message.usage.input_tokens == 250 and message.usage.output_tokens == 20
    assert message.usage.cache_read_input_tokens == 160 and message.usage.cache_creation_input_tokens == 10
    assert raw.headers["request-id"] == "req_fake0002"  # the last round's answer

    first, second = (r.json() for r in claude.fake.message_requests())
    check_shape(first)
    check_shape(second)
    assert [t["name"] for t in first["tools"]] == [RECALL, SEARCH]
    assert set(first["tools"][0]) == {"name", "description", "input_schema"}
    assert first["tools"][0]["input_schema"]["required"] == ["page_index"]
    assert "tool_choice" not in first and "tool_choice" not in second
    assert second["tools"] == first["tools"]  # the same prefix: the prompt cache keeps hitting
    assert second["messages"][:-2] == first["messages"]
    assert second["messages"][-2] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_r1", "name": RECALL, "input": {"page_index": 1}},
        ],
    }
    (answer,) = results(second["messages"][-1])
    assert answer["tool_use_id"] == "toolu_r1" and "## Page #1" in answer["content"]
    assert "My locker code is 4417" in answer["content"] and "Noted (1)." in answer["content"]


async def test_the_sync_sdk_gets_the_final_answer(make_proxy: MakeProxy, claude: Claude) -> None:
    _, url = await paged_client(make_proxy, claude)
    claude.fake.reply_json(tool_uses=[recall(2)])
    claude.fake.reply_json("The standup is at 9:30.")

    def ask() -> Any:
        with sync_client(url) as client:
            return client.messages.create(model=MODEL, max_tokens=200, system=SYSTEM, messages=history())

    message = await asyncio.to_thread(ask)
    assert [b.type for b in message.content] == ["text"] and message.content[0].text == "The standup is at 9:30."
    assert message.stop_reason == "end_turn"
    (answer,) = results(claude.fake.message_requests()[1].json()["messages"][-1])
    assert "moved the standup to 9:30" in answer["content"]


async def test_a_recall_is_counted_and_an_unknown_page_explained(make_proxy: MakeProxy, claude: Claude) -> None:
    client, url = await paged_client(make_proxy, claude)
    claude.fake.reply_json(tool_uses=[recall(1), recall(42)])
    claude.fake.reply_json("done")
    raw = await client.messages.with_raw_response.create(model=MODEL, max_tokens=200, messages=history())
    assert (await raw.parse()).content[0].text == "done"
    calls = tool_uses(claude.fake.message_requests()[1].json()["messages"][-2])
    first, unknown = results(claude.fake.message_requests()[1].json()["messages"][-1])
    assert [first["tool_use_id"], unknown["tool_use_id"]] == [c["id"] for c in calls]  # in the calls' order
    assert "## Page #1" in first["content"] and unknown["content"].startswith("There is no archived page #42")
    async with aiohttp.ClientSession() as http:
        session = raw.headers["X-Ctx-Session"]
        shown = await http.get(
            f"{url}/admin/tenants/default/sessions/{session}", headers={"Authorization": "Bearer adm"}
        )
        pages = {p["page"]: p for p in (await shown.json())["pages"]}
    assert pages[1]["recalls"] == 1 and pages[2]["recalls"] == 0


async def test_the_rounds_are_in_a_header_and_the_calls_counted_once(make_proxy: MakeProxy, claude: Claude) -> None:
    """``X-Ctx-Tool-Rounds`` on a JSON answer for which ctxproxy answered rounds, as for chat
    completions; the calls are in the request's log line and in the metrics, counted once."""
    client, url = await paged_client(make_proxy, claude)
    claude.fake.reply_json(tool_uses=[recall(1), recall(42)])
    claude.fake.reply_json(tool_uses=[recall(2)])
    claude.fake.reply_json("done")
    claude.fake.reply_json("no tools needed")
    with capture() as logs:
        raw = await client.messages.with_raw_response.create(model=MODEL, max_tokens=200, messages=history())
        plain = await client.messages.with_raw_response.create(model=MODEL, max_tokens=200, messages=history())
        lines = await request_lines(logs, 2)
    assert raw.headers["X-Ctx-Tool-Rounds"] == "2" and (await raw.parse()).content[-1].text == "done"
    assert "X-Ctx-Tool-Rounds" not in plain.headers and (await plain.parse()).content[0].text == "no tools needed"
    assert lines[0]["tool_calls"] == {"recall_page": 3} and "tool_calls" not in lines[1]
    metrics = await scrape(url + "/metrics")
    assert metrics.total("ctxproxy_proxy_tool_calls_total", tenant="default", tool="recall_page") == 3


async def test_a_mixed_turn_goes_to_the_client_without_ours(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_json(
        "Checking.", tool_uses=[recall(1), {"id": "toolu_w", "name": "get_weather", "input": {"city": "Oslo"}}]
    )
    message = await client.messages.create(model=MODEL, max_tokens=200, messages=history(), tools=[WEATHER])
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[1].id == "toolu_w" and message.content[1].input == {"city": "Oslo"}
    assert message.stop_reason == "tool_use"
    (sent,) = claude.fake.message_requests()  # ours was not answered: one request
    assert [t["name"] for t in sent.json()["tools"]] == ["get_weather", RECALL, SEARCH]

    # The client's next request, with its own result, is a valid conversation and goes through.
    follow = [
        *history(),
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_w", "content": "sunny"}]},
    ]
    claude.fake.reply_json("It is sunny in Oslo.")
    again = await client.messages.create(model=MODEL, max_tokens=200, messages=follow, tools=[WEATHER])
    assert again.content[0].text == "It is sunny in Oslo."
    forwarded = claude.fake.message_requests()[1].json()
    check_shape(forwarded)
    assert [u["name"] for m in forwarded["messages"] for u in tool_uses(m)] == ["get_weather"]


async def test_the_round_after_max_rounds_must_answer_in_text(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude, "[tools]\nmax_rounds = 2\n")
    claude.fake.reply_json("One.", tool_uses=[recall(1)])
    claude.fake.reply_json("Two.", tool_uses=[recall(2)])
    claude.fake.reply_json("Three.", tool_uses=[recall(3)])  # told not to, the model calls anyway
    message = await client.messages.create(model=MODEL, max_tokens=200, messages=history())
    assert [b.text for b in message.content] == ["One.", "Two.", "Three."]
    assert message.stop_reason == "end_turn"  # our call was taken out: the turn is over
    sent = [r.json() for r in claude.fake.message_requests()]
    assert len(sent) == 3
    assert ["tool_choice" in body for body in sent] == [False, False, True]
    assert sent[2]["tool_choice"] == {"type": "none"} and sent[2]["tools"] == sent[0]["tools"]
    check_shape(sent[2])


async def test_a_client_tool_named_like_ours_renames_ours(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    theirs = {"name": RECALL, "description": "The client's own.", "input_schema": {"type": "object"}}
    claude.fake.reply_json(tool_uses=[recall(1, name=RECALL + "_")])
    claude.fake.reply_json("4417.")
    message = await client.messages.create(model=MODEL, max_tokens=200, messages=history(), tools=[theirs])
    assert message.content[0].text == "4417." and message.stop_reason == "end_turn"
    first, second = (r.json() for r in claude.fake.message_requests())
    assert [t["name"] for t in first["tools"]] == [RECALL, RECALL + "_", SEARCH]
    assert first["tools"][0] == theirs
    assert RECALL + "_" in str(first.get("system")) + str(first["messages"])  # the Contents Page names it
    assert "## Page #1" in results(second["messages"][-1])[0]["content"]


async def test_a_call_of_the_clients_tool_of_that_name_is_the_clients(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    theirs = {"name": RECALL, "description": "The client's own.", "input_schema": {"type": "object"}}
    claude.fake.reply_json(tool_uses=[recall(1, id="toolu_c")])
    message = await client.messages.create(model=MODEL, max_tokens=200, messages=history(), tools=[theirs])
    assert [(b.type, b.name) for b in message.content] == [("tool_use", RECALL)]
    assert message.stop_reason == "tool_use" and len(claude.fake.message_requests()) == 1


async def test_a_tool_choice_that_leaves_no_choice_gets_no_tools(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    declined: list[dict[str, Any]] = [{"type": "none"}, {"type": "any"}, {"type": "tool", "name": "get_weather"}]
    for choice in declined:
        await client.messages.create(
            model=MODEL,
            max_tokens=200,
            messages=history(),
            tools=[WEATHER],
            tool_choice=choice,
        )
        sent = claude.fake.message_requests()[-1].json()
        assert [t["name"] for t in sent["tools"]] == ["get_weather"] and sent["tool_choice"] == choice
        prompt = str(sent.get("system")) + str(sent["messages"])
        assert "## Contents Page" in prompt and RECALL not in prompt  # nor named by the Contents Page
    auto = {"type": "auto", "disable_parallel_tool_use": True}
    await client.messages.create(model=MODEL, max_tokens=200, messages=history(), tools=[WEATHER], tool_choice=auto)
    assert [t["name"] for t in claude.fake.message_requests()[-1].json()["tools"]] == ["get_weather", RECALL, SEARCH]


async def test_no_tools_before_anything_is_archived(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    await client.messages.create(model=MODEL, max_tokens=200, messages=[{"role": "user", "content": "hi"}])
    assert "tools" not in claude.fake.message_requests()[0].json()


async def test_thinking_goes_back_with_the_calls_and_reaches_the_client(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await paged_client(make_proxy, claude)
    claude.fake.reply_json(thinking="The code is archived.", tool_uses=[recall(1)])
    claude.fake.reply_json("4417.", thinking="Page 1 says 4417.")
    message = await client.messages.create(
        model=MODEL, max_tokens=2000, messages=history(), thinking={"type": "enabled", "budget_tokens": 1024}
    )
    assert [b.type for b in message.content] == ["thinking", "thinking", "text"]
    sent_back = claude.fake.message_requests()[1].json()["messages"][-2]
    assert [b["type"] for b in sent_back["content"]] == ["thinking", "tool_use"]
    assert sent_back["content"][0]["thinking"] == "The code is archived." and sent_back["content"][0]["signature"]

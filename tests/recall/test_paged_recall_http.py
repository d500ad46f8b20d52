"""The `paged` strategy through the real proxy: older pages leave the prompt for a Contents Page,
and the model reads one back with ctxproxy's own `recall_page` tool, which the client never sees."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import orjson

from tests.conftest import MakeProxy, Upstream
from tests.recall.paged import PAGED_TENANT, RECALL, SEARCH, WEATHER, paged_history


def recall(page: int) -> dict[str, Any]:
    return {"function": {"name": RECALL, "arguments": orjson.dumps({"page_index": page}).decode()}}


async def test_json_recall_is_answered_by_the_proxy(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    upstream.fake.reply_json(
        tool_calls=[recall(1)], usage={"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}
    )
    upstream.fake.reply_json(
        "Your locker code is 4417.", usage={"prompt_tokens": 80, "completion_tokens": 7, "total_tokens": 87}
    )
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            proxy.url("/v1/chat/completions"), json={"model": "gpt-4o-mini", "messages": paged_history()}
        )
        body = await resp.json()
    assert resp.status == 200, body
    message = body["choices"][0]["message"]
    assert message["content"] == "Your locker code is 4417." and not message.get("tool_calls")
    assert body["usage"]["prompt_tokens"] == 130 and body["usage"]["total_tokens"] == 142

    first, second = (r.json() for r in upstream.fake.chat_requests())
    # What the model saw: the system prompt, the Contents Page, the two newest pages raw, the question.
    contents = first["messages"][1]
    assert contents["name"] == "contents_page" and contents["content"].startswith("## Contents Page")
    assert "[Page #4]" in contents["content"] and "[Page #5]" not in contents["content"]
    assert "4417" in contents["content"]  # the page's one-line summary
    assert [m["content"] for m in first["messages"][2:]] == [m["content"] for m in paged_history()[-3:]]
    assert [t["function"]["name"] for t in first["tools"]] == [RECALL, SEARCH]
    # Round two carries ctxproxy's answer: page 1, raw.
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and "## Page #1" in tool_message["content"]
    assert "My locker code is 4417" in tool_message["content"] and "Noted (1)." in tool_message["content"]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == RECALL


async def test_stream_recall_through_the_openai_sdk(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    upstream.fake.reply_stream(tool_calls=[recall(2)])
    upstream.fake.reply_stream(["Standup ", "is ", "at ", "9:30."])
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    stream = await client.chat.completions.create(model="gpt-4o-mini", messages=paged_history(), stream=True)  # type: ignore[arg-type]
    text, calls, finishes = [], [], []
    async for chunk in stream:
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            calls += choice.delta.tool_calls or []
            finishes.append(choice.finish_reason)
    await client.close()
    assert "".join(text) == "Standup is at 9:30."
    assert calls == []
    assert [f for f in finishes if f] == ["stop"]
    second = upstream.fake.chat_requests()[1].json()
    assert "moved the standup to 9:30" in second["messages"][-1]["content"]


async def test_recalls_are_counted_and_unknown_pages_explained(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT}, proxy_toml='[admin]\napi_key = "adm"\n')
    upstream.fake.reply_json(tool_calls=[recall(1), recall(42)])
    upstream.fake.reply_json("done")
    async with aiohttp.ClientSession() as http:
        resp = await http.post(proxy.url("/v1/chat/completions"), json={"model": "m", "messages": paged_history()})
        session = resp.headers["X-Ctx-Session"]
        answers = [m["content"] for m in upstream.fake.chat_requests()[1].json()["messages"] if m["role"] == "tool"]
        shown = await http.get(
            proxy.url(f"/admin/tenants/default/sessions/{session}"), headers={"Authorization": "Bearer adm"}
        )
        detail = await shown.json()
    assert "## Page #1" in answers[0]
    assert answers[1].startswith("There is no archived page #42") and "1, 2, 3, 4." in answers[1]
    pages = {p["page"]: p for p in detail["pages"]}
    assert pages[1]["recalls"] == 1 and pages[1]["last_recall_turn"] == 6
    assert pages[2]["recalls"] == 0


async def test_client_tools_alongside_proxy_tools(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    upstream.fake.reply_json(
        tool_calls=[{"id": "call_w", "function": {"name": "get_weather", "arguments": "{}"}}, recall(1)]
    )
    async with aiohttp.ClientSession() as http:
        body = {"model": "m", "messages": paged_history(), "tools": [WEATHER]}
        resp = await http.post(proxy.url("/v1/chat/completions"), json=body)
        answer = await resp.json()
        sent = upstream.fake.chat_requests()[0].json()
        assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather", RECALL, SEARCH]
        # The client sees only its own call: the mixed turn's proxy call is dropped, unanswered.
        calls = answer["choices"][0]["message"]["tool_calls"]
        assert [c["function"]["name"] for c in calls] == ["get_weather"]
        assert answer["choices"][0]["finish_reason"] == "tool_calls"
        assert len(upstream.fake.chat_requests()) == 1

        # Its next request, with its own tool result, is a valid conversation and goes through.
        follow = [
            *paged_history(),
            answer["choices"][0]["message"],
            {"role": "tool", "tool_call_id": "call_w", "content": "sunny"},
        ]
        upstream.fake.reply_json("It is sunny.")
        resp = await http.post(proxy.url("/v1/chat/completions"), json={**body, "messages": follow})
        assert resp.status == 200
        assert (await resp.json())["choices"][0]["message"]["content"] == "It is sunny."
    forwarded = upstream.fake.chat_requests()[1].json()["messages"]
    assert forwarded[-2]["tool_calls"][0]["id"] == "call_w" and forwarded[-1]["tool_call_id"] == "call_w"
    assert all(c["function"]["name"] != RECALL for m in forwarded for c in m.get("tool_calls") or [])


async def test_no_tools_before_anything_is_archived(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT})
    short = [{"role": "user", "content": "hi"}]
    async with aiohttp.ClientSession() as http:
        resp = await http.post(proxy.url("/v1/chat/completions"), json={"model": "m", "messages": short})
        assert resp.status == 200
    assert "tools" not in upstream.fake.chat_requests()[0].json()


async def test_contents_page_is_byte_identical_between_archivals(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": PAGED_TENANT.replace("archive_batch = 1", "archive_batch = 3")})
    async with aiohttp.ClientSession() as http:
        for turns in (5, 6):  # 5 turns + question: archive; 6: below active + batch again
            messages = paged_history(turns)
            resp = await http.post(proxy.url("/v1/chat/completions"), json={"model": "m", "messages": messages})
            assert resp.status == 200
    first, second = (r.json()["messages"] for r in upstream.fake.chat_requests())
    assert first[1]["content"].startswith("## Contents Page")
    assert first[1] == second[1]
    assert orjson.dumps(first[:-1]) == orjson.dumps(second[: len(first) - 1])


async def test_llm_page_lines_and_their_fallback(make_proxy: MakeProxy, upstream: Upstream) -> None:
    llm = PAGED_TENANT.replace('summarizer = "extractive"', 'summarizer = "llm"\nsummary_model = "cheap-model"')
    proxy = await make_proxy({"default": llm, "other": llm})
    pages = [
        {"summary": f"Fact number {i}", "lines": [f"User states fact {i}", f"Assistant notes {i}"]} for i in range(1, 5)
    ]
    upstream.fake.reply_json(orjson.dumps({"pages": pages}).decode())
    async with aiohttp.ClientSession() as http:
        resp = await http.post(proxy.url("/v1/chat/completions"), json={"model": "m", "messages": paged_history()})
        assert resp.status == 200
        upstream.fake.reply_json("Sure! Page 1 is about lockers.")  # not the JSON asked for
        resp = await http.post(
            proxy.url("/t/other/v1/chat/completions"), json={"model": "m", "messages": paged_history()}
        )
        assert resp.status == 200
    asked, answered, asked_again, answered_again = (r.json() for r in upstream.fake.chat_requests())
    assert asked["model"] == "cheap-model" and "tools" not in asked
    contents = answered["messages"][1]["content"]
    assert "[Page #1] Fact number 1" in contents and "  - Assistant notes 4" in contents
    assert asked_again["model"] == "cheap-model"
    fallback = answered_again["messages"][1]["content"]
    assert "[Page #1] User: My locker code is 4417" in fallback  # the extractive lines instead

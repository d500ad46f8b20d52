"""With strategy ``paged``, the searchable copies of archived pages live in the session layer:
two users sharing a session key (the same opening, or the same ``X-Session-Id``) must never
get each other's page text — not injected, not from ``search_memory``."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.recall.paged import PAGED_TENANT as PAGED
from tests.recall.paged import SEARCH

TENANT = PAGED.replace("enabled = false", "enabled = true")
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
OPENING = "Hello, I have a few things to note today."
ALICE_FACTS = [
    OPENING,
    "My locker code is 4417, please remember it.",
    "My badge number is 90210 for the east gate.",
    "The standup moved to 9:30 on Tuesdays.",
    "My parking spot is level 3, bay 4417.",
]
BOB_FACTS = [
    OPENING,
    "My bike is the blue one by the door.",
    "I water the office plants on Mondays.",
    "The printer on floor two jams a lot.",
    "Lunch is usually at noon for me.",
]
QUESTION = "What is my locker code?"


def history(facts: list[str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [SYSTEM]
    for i, fact in enumerate(facts):
        messages += [{"role": "user", "content": fact}, {"role": "assistant", "content": f"Noted ({i + 1})."}]
    return [*messages, {"role": "user", "content": QUESTION}]


async def post(proxy: Proxy, messages: list[dict[str, Any]], user: str, session: str | None) -> aiohttp.ClientResponse:
    headers = {"X-Session-Id": session} if session else {}
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            proxy.url("/v1/chat/completions"), json={"model": "m", "messages": messages, "user": user}, headers=headers
        )
        await resp.read()
        assert resp.status == 200
        return resp


def search_call(query: str) -> dict[str, Any]:
    return {"function": {"name": SEARCH, "arguments": orjson.dumps({"query": query, "top_k": 10}).decode()}}


@pytest.mark.parametrize("session", ["team-chat-1", None], ids=["shared X-Session-Id", "same opening"])
async def test_archived_pages_stay_with_their_user(
    make_proxy: MakeProxy, upstream: Upstream, session: str | None
) -> None:
    proxy = await make_proxy({"default": TENANT})
    alice = await post(proxy, history(ALICE_FACTS), "alice", session)
    assert alice.headers.get("X-Ctx-Compacted") == "1"  # alice's pages 1-4 are archived

    upstream.fake.reply_json(tool_calls=[search_call("locker code badge gate bike")])
    upstream.fake.reply_json("I do not know your locker code.")
    bob = await post(proxy, history(BOB_FACTS), "bob", session)
    assert bob.headers["X-Ctx-Session"] == alice.headers["X-Ctx-Session"]
    first, second = (r.json() for r in upstream.fake.chat_requests()[-2:])
    assert SEARCH in [t["function"]["name"] for t in first["tools"]]  # bob has pages of his own
    assert "4417" not in str(first["messages"]) and "90210" not in str(first["messages"])  # nothing injected
    answer = second["messages"][-1]
    assert answer["role"] == "tool" and "blue one by the door" in answer["content"]  # bob's own page
    assert "4417" not in answer["content"] and "90210" not in answer["content"]

    # The same search by alice finds her page: the tool works, the layer is hers.
    upstream.fake.reply_json(tool_calls=[search_call("locker code badge gate bike")])
    upstream.fake.reply_json("4417.")
    await post(proxy, history(ALICE_FACTS), "alice", session)
    assert "4417" in upstream.fake.chat_requests()[-1].json()["messages"][-1]["content"]

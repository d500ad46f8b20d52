"""The admin API's view of a user's memories is everything that user's requests wrote — their
user layer, their own session layers and the cards they wrote to a scope — and its deletes
remove all of it, so a later injection or ``search_memory`` by that user finds nothing, while
other users' memories stay as they were."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.recall.test_admin_api import ADMIN, admin
from tests.recall.test_memory_http import DECISION, QUESTION, tenant

ENV = {"ADMIN_KEY": "s3cret"}
MEMORIES = "/admin/tenants/default/users/{}/memories"
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
FRIDAYS = [
    SYSTEM,
    {"role": "user", "content": "Constraint: never deploy the orders service on Fridays."},
    {"role": "assistant", "content": "Understood, no Friday deploys for the orders service."},
    {"role": "user", "content": "Thanks, and what about the cache layer?"},
    {"role": "assistant", "content": "Redis is fine for the cache layer."},
    {"role": "user", "content": "Please write the release checklist."},
]
ASK = [{"role": "user", "content": "Can we deploy the orders service on Friday?"}]


async def chat(
    proxy: Proxy, messages: list[dict[str, Any]], user: str, scope: str | None = None, session: str | None = None
) -> aiohttp.ClientResponse:
    headers = {"X-Ctx-User": user} | ({"X-Ctx-Scope": scope} if scope else {})
    headers |= {"X-Session-Id": session} if session else {}
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            proxy.url("/v1/chat/completions"), json={"model": "m", "messages": messages}, headers=headers
        )
        await resp.read()
        assert resp.status == 200
        return resp


def injected_text(upstream: Upstream) -> str:
    messages = upstream.fake.chat_requests()[-1].json()["messages"]
    injected = (m for m in messages if m["role"] == "user" and str(m["content"]).startswith("## Relevant Memories"))
    return " ".join(str(m["content"]) for m in injected)


async def listed(proxy: Proxy, user: str, query: str = "") -> list[dict[str, Any]]:
    status, body = await admin(proxy, "GET", MEMORIES.format(user) + (f"?q={query}" if query else ""))
    assert status == 200
    return list(body["data"])


async def test_a_users_scope_cards_are_listed_searched_and_deleted(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()}, proxy_toml=ADMIN, env=ENV)
    assert (await chat(proxy, FRIDAYS, "alice", "orders-team")).headers.get("X-Ctx-Compacted") == "1"
    await chat(proxy, ASK, "bob", "orders-team")
    assert "Friday" in injected_text(upstream)  # a teammate reads the scope: it is shared

    memories = await listed(proxy, "alice")
    assert {m["layer"] for m in memories} == {"scope"}  # and each in her session layer: listed once
    assert any("Friday" in m["content"] for m in memories)
    assert all("Friday" in m["content"] for m in await listed(proxy, "alice", "Friday deploys"))
    assert await listed(proxy, "bob") == []  # bob wrote nothing

    status, body = await admin(proxy, "DELETE", MEMORIES.format("alice"))
    assert status == 200 and body["deleted"] == len({m["id"] for m in memories})
    assert await listed(proxy, "alice") == []
    await chat(proxy, ASK, "alice", "orders-team")
    assert "Friday" not in injected_text(upstream)
    await chat(proxy, ASK, "bob", "orders-team")  # only alice wrote them: gone from the scope too
    assert "Friday" not in injected_text(upstream)
    await chat(proxy, [*FRIDAYS[:-1], ASK[0]], "alice", "orders-team")  # her own session: gone too
    assert "Friday" not in injected_text(upstream)


async def test_search_memory_does_not_find_a_deleted_memory(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()}, proxy_toml=ADMIN, env=ENV)
    await chat(proxy, FRIDAYS, "alice", "orders-team")
    await chat(proxy, DECISION, "alice", "orders-team")  # something left to search after the delete
    target = [m for m in await listed(proxy, "alice", "Friday") if "Friday" in m["content"]]
    assert target
    for memory in target:
        status, _ = await admin(proxy, "DELETE", MEMORIES.format("alice") + "/" + memory["id"])
        assert status == 200
    status, body = await admin(proxy, "DELETE", MEMORIES.format("alice") + "/" + target[0]["id"])
    assert status == 404 and body["error"]["code"] == "not_found"

    query = orjson.dumps({"query": "deploy orders Friday", "top_k": 10}).decode()
    upstream.fake.reply_json(tool_calls=[{"function": {"name": "ctxproxy_search_memory", "arguments": query}}])
    upstream.fake.reply_json("No idea.")
    await chat(proxy, [{"role": "user", "content": "Remind me of our rules."}], "alice", "orders-team")
    first, second = (r.json() for r in upstream.fake.chat_requests()[-2:])
    assert "ctxproxy_search_memory" in [t["function"]["name"] for t in first["tools"]]
    answer = second["messages"][-1]
    assert answer["role"] == "tool" and "Friday" not in answer["content"]
    assert any("PostgreSQL" in m["content"] for m in await listed(proxy, "alice"))  # the rest is kept


async def test_a_teammates_identical_card_survives(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()}, proxy_toml=ADMIN, env=ENV)
    await chat(proxy, FRIDAYS, "alice", "orders-team", session="alice-1")
    await chat(proxy, FRIDAYS, "bob", "orders-team", session="bob-1")  # the same cards: ids are content hashes
    bobs = await listed(proxy, "bob")
    assert {m["id"] for m in bobs} == {m["id"] for m in await listed(proxy, "alice")}

    status, _ = await admin(proxy, "DELETE", MEMORIES.format("alice"))
    assert status == 200
    assert await listed(proxy, "alice") == []
    assert await listed(proxy, "bob") == bobs
    await chat(proxy, ASK, "carol", "orders-team")  # the scope still has bob's copy
    assert "Friday" in injected_text(upstream)


async def test_deleting_alices_memories_leaves_bobs_session_alone(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()}, proxy_toml=ADMIN, env=ENV)
    # One session key, and the same card ids, for two users (bob's system prompt differs, so he
    # does not reuse alice's summary: his request writes cards of its own).
    bobs_decision = [{"role": "system", "content": "You are a terse assistant."}, *DECISION[1:]]
    await chat(proxy, DECISION, "alice", session="team-chat")
    await chat(proxy, bobs_decision, "bob", session="team-chat")
    bobs, alices = await listed(proxy, "bob"), await listed(proxy, "alice")
    assert any("PostgreSQL 16" in m["content"] for m in bobs)
    assert {m["id"] for m in bobs} <= {m["id"] for m in alices}

    status, body = await admin(proxy, "DELETE", MEMORIES.format("alice"))
    assert status == 200 and body["deleted"] == len(alices)
    assert await listed(proxy, "bob") == bobs
    question = [{"role": "user", "content": "Which PostgreSQL version do the orders use?"}]
    await chat(proxy, question, "bob", session="team-chat")
    assert "PostgreSQL 16" in injected_text(upstream)
    await chat(proxy, question, "alice", session="team-chat")
    assert "PostgreSQL 16" not in injected_text(upstream)
    await chat(proxy, QUESTION, "alice")
    assert "PostgreSQL 16" not in injected_text(upstream)

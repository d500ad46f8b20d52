"""Two users who share a session key — the same opening (system prompt and first message) or
the same ``X-Session-Id`` — never read each other's memories through the session layer:
with a user, the session layer is that user's. Without one, a session's requests share it."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.recall.test_memory_http import injected, tenant

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
OPENING = {"role": "user", "content": "Let's plan the orders service together."}
ALICE = [
    SYSTEM,
    OPENING,
    {"role": "assistant", "content": "We will run the orders service on PostgreSQL 16, listening on port 5433."},
    {"role": "user", "content": "Thanks, and what about the cache layer?"},
    {"role": "assistant", "content": "Redis is fine for the cache layer."},
    {"role": "user", "content": "Please write the migration plan."},
]
QUESTION = {"role": "user", "content": "Which PostgreSQL version and port do the orders use?"}
BOB = [SYSTEM, OPENING, {"role": "assistant", "content": "Sure, where do we start?"}, QUESTION]


async def post(
    proxy: Proxy, messages: list[dict[str, Any]], user: str | None = None, session: str | None = None
) -> aiohttp.ClientResponse:
    headers = {"X-Session-Id": session} if session else {}
    body: dict[str, Any] = {"model": "m", "messages": messages} | ({"user": user} if user else {})
    async with aiohttp.ClientSession() as http:
        resp = await http.post(proxy.url("/v1/chat/completions"), json=body, headers=headers)
        await resp.read()
        assert resp.status == 200
        return resp


def forwarded_text(upstream: Upstream, index: int = -1) -> str:
    return str(upstream.fake.chat_requests()[index].json()["messages"])


async def test_the_same_opening_does_not_share_memories(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()})
    alice = await post(proxy, ALICE, user="alice")
    assert alice.headers.get("X-Ctx-Compacted") == "1"
    bob = await post(proxy, BOB, user="bob")
    assert bob.headers["X-Ctx-Session"] == alice.headers["X-Ctx-Session"]  # one session key...
    assert "5433" not in forwarded_text(upstream)  # ...but not one memory layer
    # alice, on the same opening, does find them (bob's very messages: no summary says it already)
    await post(proxy, BOB, user="alice")
    assert "5433" in (injected(upstream) or "")


async def test_a_shared_session_id_does_not_share_memories(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()})
    alice = await post(proxy, ALICE, user="alice", session="team-chat-1")
    assert alice.headers.get("X-Ctx-Compacted") == "1"
    bob = await post(proxy, [QUESTION], user="bob", session="team-chat-1")
    assert bob.headers["X-Ctx-Session"] == "team-chat-1"
    assert injected(upstream) is None and "5433" not in forwarded_text(upstream)
    await post(proxy, [QUESTION], user="alice", session="team-chat-1")
    assert "5433" in (injected(upstream) or "")


async def test_without_a_user_a_session_id_still_shares_its_memories(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()})
    await post(proxy, ALICE, session="anon-chat")
    await post(proxy, [QUESTION], session="anon-chat")
    assert "5433" in (injected(upstream) or "")
    await post(proxy, [QUESTION], session="another-chat")
    assert injected(upstream) is None

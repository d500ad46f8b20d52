"""Note 002's send order through the real proxy: a ``rounds`` tenant with ``layered = true``
forwards [system] [User Memory] [Scope Memory] [Session Memory blocks] [raw rounds] [current
user message] — with a real Session Memory block and memories in both the user and the scope
layer; the session layer's own memories go just before the current message."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.conftest import MakeProxy, Proxy, Upstream

# A = 2, B = 2: four uncompressed rounds compress the oldest two into one Session Memory block.
TENANT = """
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "rounds"
summarizer = "extractive"
[compaction.rounds]
full_context_turns = 2
cached_context_turns = 2
[memory]
enabled = true
layered = true
inject_top_k = 10
"""
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER_FACT = "I prefer metric units: always give distances in kilometres."
SCOPE_FACT = "We decided to use PostgreSQL 16 for the orders service database."
SESSION_FACT = "The staging deploy window is Fridays at 16:00 UTC."
SESSION_ROUNDS = [
    (SESSION_FACT, "Noted: staging deploys on Fridays at 16:00 UTC."),
    ("Rollbacks need approval from the release manager.", "Understood, rollbacks need approval."),
    ("Let's draft the release checklist.", "Sure, here is a first draft."),
]
QUESTION = "For the checklist: the staging deploy window, the PostgreSQL version of orders, distances in kilometres?"


def conversation(rounds: list[tuple[str, str]], question: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [SYSTEM]
    for asked, answered in rounds:
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
    messages.append({"role": "user", "content": question})
    return messages


async def post(proxy: Proxy, messages: list[dict[str, Any]], headers: dict[str, str]) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            proxy.url("/v1/chat/completions"), json={"model": "m", "messages": messages}, headers=headers
        )
        assert resp.status == 200, await resp.text()
        return resp


async def remember_user_and_scope(proxy: Proxy) -> None:
    """Alice's own conversation (her user layer) and the orders team's (its scope layer), each
    long enough to be compacted, which is when memories are written."""
    personal = [
        (USER_FACT, "Understood, kilometres it is."),
        ("Also keep answers short.", "Will do."),
        ("What is a good running route?", "Try the river loop."),
    ]
    resp = await post(proxy, conversation(personal, "Thanks!"), {"X-Ctx-User": "alice"})
    assert resp.headers.get("X-Ctx-Compacted") == "1"
    team = [
        (SCOPE_FACT, "Good choice: PostgreSQL 16 for orders."),
        ("And Redis for the cache layer.", "Fine."),
        ("Who reviews the schema?", "Priya reviews it."),
    ]
    resp = await post(proxy, conversation(team, "Great."), {"X-Ctx-Scope": "orders-team"})
    assert resp.headers.get("X-Ctx-Compacted") == "1"


def outline(messages: list[dict[str, Any]]) -> list[str]:
    """Each message as ``role[/name]: first line``."""
    out = []
    for m in messages:
        who = m["role"] + (f"/{m['name']}" if m.get("name") else "")
        out.append(f"{who}: {str(m.get('content')).splitlines()[0]}")
    return out


@pytest.mark.parametrize("placement", ["assistant_named", "system"])
async def test_layered_order_with_a_session_memory_block(
    make_proxy: MakeProxy, upstream: Upstream, placement: str
) -> None:
    """With ``summary_placement = "system"`` the Session Memory is a system message too: the
    layers still go before it, not after every leading system message."""
    tenant = TENANT.replace(
        'summarizer = "extractive"', f'summarizer = "extractive"\nsummary_placement = "{placement}"'
    )
    proxy = await make_proxy({"default": tenant})
    await remember_user_and_scope(proxy)
    both = {"X-Ctx-User": "alice", "X-Ctx-Scope": "orders-team"}
    # Alice, in the orders team, on a conversation of her own: 4 rounds → rounds 1-2 compressed.
    resp = await post(proxy, conversation(SESSION_ROUNDS, "Add the deploy window to it."), both)
    assert resp.headers.get("X-Ctx-Compacted") == "1" and resp.headers["X-Ctx-Summarized"] == "5"
    # Her next request: 3 uncompressed rounds (< A + B), so the block stays as it is.
    final = conversation([*SESSION_ROUNDS, ("Add the deploy window to it.", "Added.")], QUESTION)
    resp = await post(proxy, final, both)
    assert "X-Ctx-Compacted" not in resp.headers

    sent = upstream.fake.chat_requests()[-1].json()["messages"]
    memory, summary = (
        ("assistant/memory_context", "assistant/context_summary")
        if placement == "assistant_named"
        else ("system", "system")
    )
    assert outline(sent) == [
        "system: You are a helpful assistant.",
        f"{memory}: ## User Memory",
        f"{memory}: ## Scope Memory",
        f"{summary}: ## Session Memory",
        "user: Let's draft the release checklist.",
        "assistant: Sure, here is a first draft.",
        "user: Add the deploy window to it.",
        "assistant: Added.",
        f"user: {QUESTION}",
    ]
    user_memory, scope_memory, session_memory = (str(m["content"]) for m in sent[1:4])
    assert "kilometres" in user_memory and "PostgreSQL" not in user_memory
    assert "PostgreSQL 16" in scope_memory and "kilometres" not in scope_memory
    assert "### Messages 2-5" in session_memory and "Fridays at 16:00 UTC" in session_memory
    # The raw rounds and the question are the client's bytes; everything else is ctxproxy's.
    assert sent[0] == final[0] and sent[4:] == final[5:]
    assert resp.headers["X-Ctx-Memories"] == str(user_memory.count("\n- ") + scope_memory.count("\n- "))


async def test_the_session_layers_memories_go_before_the_current_message(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """What only the session layer holds (the session's cards, written under another scope, so
    not in the layers this request reads) is injected as ``## Relevant Memories`` just before the
    current message: after the raw rounds, never between the layers and the Session Memory."""
    proxy = await make_proxy({"default": TENANT})
    await remember_user_and_scope(proxy)
    earlier = {"X-Ctx-User": "alice", "X-Ctx-Scope": "release-team"}
    await post(proxy, conversation(SESSION_ROUNDS, "Add the deploy window to it."), earlier)
    final = conversation([*SESSION_ROUNDS, ("Add the deploy window to it.", "Added.")], QUESTION)
    await post(proxy, final, {"X-Ctx-User": "alice", "X-Ctx-Scope": "orders-team"})

    sent = upstream.fake.chat_requests()[-1].json()["messages"]
    assert outline(sent) == [
        "system: You are a helpful assistant.",
        "assistant/memory_context: ## User Memory",
        "assistant/memory_context: ## Scope Memory",
        "assistant/context_summary: ## Session Memory",
        "user: Let's draft the release checklist.",
        "assistant: Sure, here is a first draft.",
        "user: Add the deploy window to it.",
        "assistant: Added.",
        "assistant/memory_context: ## Relevant Memories",
        f"user: {QUESTION}",
    ]
    assert "Fridays at 16:00 UTC" in str(sent[-2]["content"])
    assert "Fridays" not in str(sent[2]["content"])  # not the orders team's memory

"""Note 002's send order through the real proxy, as ``rounds`` does it by default (no ``[memory]``
table: memory on, layered): [system] [User Memory] [Scope Memory] [Session Memory blocks] [raw
rounds] [current user message] — each layer its own block within its own budget, nothing
between the raw rounds and the current message."""

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
ASK = "Add the deploy window and the PostgreSQL version of the orders service to it."
QUESTION = "For the checklist: the staging deploy window, the PostgreSQL version of orders, distances in kilometres?"
BOTH = {"X-Ctx-User": "alice", "X-Ctx-Scope": "orders-team"}


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
        await proxy.settle()  # the rounds' memories are written in the background
        return resp


async def remember_user_and_scope(proxy: Proxy) -> None:
    """Alice's own conversation (what she says of herself: her user layer) and the orders team's
    (its facts: the scope layer), each written after its rounds, before any compaction."""
    personal = [(USER_FACT, "Understood, kilometres it is."), ("What is a good running route?", "Try the river loop.")]
    resp = await post(proxy, conversation(personal, "Thanks!"), {"X-Ctx-User": "alice"})
    assert "X-Ctx-Compacted" not in resp.headers
    team = [(SCOPE_FACT, "Good choice: PostgreSQL 16 for orders."), ("Who reviews the schema?", "Priya reviews it.")]
    resp = await post(proxy, conversation(team, "Great."), {"X-Ctx-Scope": "orders-team"})
    assert "X-Ctx-Compacted" not in resp.headers


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
    """Note 002: "K >= A+B 时，发送给 LLM 的结构为：[User Memory] (检索注入) [Scope Memory] (检索注入)
    [Session Memory] (压缩块列表) [所有未压缩 raw] [current user 消息]". With ``summary_placement =
    "system"`` the Session Memory is a system message too: the layers still go before it."""
    tenant = TENANT.replace(
        'summarizer = "extractive"', f'summarizer = "extractive"\nsummary_placement = "{placement}"'
    )
    proxy = await make_proxy({"default": tenant})
    await remember_user_and_scope(proxy)
    # Alice, in the orders team, on a conversation of her own: 4 rounds → rounds 1-2 compressed.
    resp = await post(proxy, conversation(SESSION_ROUNDS, ASK), BOTH)
    assert resp.headers.get("X-Ctx-Compacted") == "1" and resp.headers["X-Ctx-Summarized"] == "5"
    compacted = upstream.fake.chat_requests()[-1].json()["messages"]
    # Her next request: 3 uncompressed rounds (< A + B), so the block stays as it is.
    final = conversation([*SESSION_ROUNDS, (ASK, "Added.")], QUESTION)
    resp = await post(proxy, final, BOTH)
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
        f"user: {ASK}",
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
    # Between two compressions the prompt's start keeps its bytes: the layers were chosen with
    # the request that compressed, and are not searched again until the next compression.
    assert sent[:4] == compacted[:4]


async def test_the_layers_keep_their_bytes_while_session_memory_only_grows(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """A compression that appends a Session Memory block leaves the prompt's start as it was —
    the layers and the blocks already sent — so the layers are not searched again for it."""
    proxy = await make_proxy({"default": TENANT})
    await remember_user_and_scope(proxy)
    await post(proxy, conversation(SESSION_ROUNDS, "Add the deploy window to it."), BOTH)
    first = upstream.fake.chat_requests()[-1].json()["messages"]
    assert "PostgreSQL" not in first[2]["content"] and first[3]["content"].startswith("## Session Memory")
    later = [*SESSION_ROUNDS, ("Add the deploy window to it.", "Added."), ("Who approves rollbacks?", "The manager.")]
    resp = await post(proxy, conversation(later, ASK), BOTH)  # 4 uncompressed rounds: 3-4 compressed
    assert resp.headers.get("X-Ctx-Compacted") == "1" and resp.headers["X-Ctx-Summarized"] == "9"
    again = upstream.fake.chat_requests()[-1].json()["messages"]
    assert again[:4] == first[:4]  # system, User Memory, Scope Memory, the first Session Memory block
    assert again[4]["content"].startswith("### Messages 6-9")  # the new block, a message of its own


async def test_the_layers_are_chosen_again_when_a_fold_rewrites_session_memory(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """A fold rewrites the Session Memory from its first block: the prompt's start changes anyway,
    and the layers are searched again, with that request's question."""
    tenant = TENANT + "memory_ratio = 0.001\n"  # the second compression folds (~128 tokens of a 128k window)
    proxy = await make_proxy({"default": tenant})
    await remember_user_and_scope(proxy)
    await post(proxy, conversation(SESSION_ROUNDS, "Add the deploy window to it."), BOTH)
    first = upstream.fake.chat_requests()[-1].json()["messages"]
    assert "PostgreSQL" not in first[2]["content"] and first[3]["content"].startswith("## Session Memory")
    later = [*SESSION_ROUNDS, ("Add the deploy window to it.", "Added."), ("Who approves rollbacks?", "The manager.")]
    resp = await post(proxy, conversation(later, ASK), BOTH)
    assert resp.headers.get("X-Ctx-Compacted") == "1" and resp.headers["X-Ctx-Summarized"] == "9"
    again = upstream.fake.chat_requests()[-1].json()["messages"]
    assert again[3]["content"].startswith("## Session Memory\n\n### Messages 2-9")  # one folded block
    assert again[2]["content"].startswith("## Scope Memory") and "PostgreSQL 16" in again[2]["content"]


async def test_nothing_goes_between_the_raw_rounds_and_the_current_message(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """Note 002: "[所有未压缩 raw] [current user 消息]" — the session's own memories (the
    compressions' cards) are its Session Memory blocks, not a ``## Relevant Memories`` message
    before the question; they stay findable with ``search_memory``, which is offered."""
    proxy = await make_proxy({"default": TENANT})
    await post(proxy, conversation(SESSION_ROUNDS, "Add the deploy window to it."), {"X-Ctx-User": "alice"})
    final = conversation([*SESSION_ROUNDS, ("Add the deploy window to it.", "Added.")], QUESTION)
    resp = await post(proxy, final, {"X-Ctx-User": "alice"})

    body = upstream.fake.chat_requests()[-1].json()
    sent = body["messages"]
    assert outline(sent)[-5:] == [
        "user: Let's draft the release checklist.",
        "assistant: Sure, here is a first draft.",
        "user: Add the deploy window to it.",
        "assistant: Added.",
        f"user: {QUESTION}",
    ]
    assert not any("## Relevant Memories" in str(m["content"]) for m in sent)
    assert [t["function"]["name"] for t in body["tools"]] == ["ctxproxy_search_memory"]
    assert "X-Ctx-Memories" not in resp.headers or resp.headers["X-Ctx-Memories"] == "0"


async def test_each_layer_gets_its_own_budget(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """Each layer its own block within its own budget, not one shared top 5: a scope full of
    matching facts does not crowd out the user's profile, and ``scope_top_k`` caps the scope's."""
    tenant = TENANT + "[memory]\nscope_top_k = 2\nuser_top_k = 3\n"
    proxy = await make_proxy({"default": tenant})
    await remember_user_and_scope(proxy)
    team = [(f"We decided the orders service runs PostgreSQL 16 replica {i}.", "Noted.") for i in range(6)]
    await post(proxy, conversation(team, "ok"), {"X-Ctx-Scope": "orders-team"})
    await post(proxy, conversation([], "Which PostgreSQL 16 replicas does the orders service run?"), BOTH)

    sent = upstream.fake.chat_requests()[-1].json()["messages"]
    assert outline(sent)[1:3] == [
        "assistant/memory_context: ## User Memory",
        "assistant/memory_context: ## Scope Memory",
    ]
    assert "kilometres" in sent[1]["content"]  # the profile holds for every question: topped up
    assert sent[2]["content"].count("\n- ") == 2

"""Long-term memory for Messages clients: a compaction writes memory cards, and a later request of
the same user gets ``## Relevant Memories`` injected into a body the Messages API accepts."""

from __future__ import annotations

import json
from typing import Any

from tests.anthropic.conftest import MODEL, Claude, MakeProxy, blocks, check_shape, tenant_toml

HEADER = "## Relevant Memories"
MEMORY = """
[compaction.rounds]
full_context_turns = 2
cached_context_turns = 1
[memory]
enabled = true
layered = false
"""
DECISION = [  # four rounds: compacted by `rounds`, which writes the summary's cards
    {"role": "user", "content": "We decided to use PostgreSQL 16 for the orders service database."},
    {"role": "assistant", "content": "Good choice: PostgreSQL 16 it is for orders."},
    {"role": "user", "content": "The service runs in the Frankfurt region."},
    {"role": "assistant", "content": "Frankfurt, noted."},
    {"role": "user", "content": "Thanks, and what about the cache layer?"},
    {"role": "assistant", "content": [{"type": "text", "text": "Redis is fine for the cache layer."}]},
    {"role": "user", "content": "Please write the migration plan."},
]
QUESTION = "Which database version does the orders service use?"
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"pattern": "postgres"}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "db: postgres 16"}
TOOLS = [{"name": "grep", "description": "Search files", "input_schema": {"type": "object"}}]


async def remember(make_proxy: MakeProxy, claude: Claude) -> Any:
    tenant = tenant_toml(claude, strategy="rounds", extra=MEMORY)
    client, _ = await make_proxy(tenants={"default": tenant})
    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=100, system="You help with databases.", messages=DECISION, metadata={"user_id": "alice"}
    )
    assert raw.headers["X-Ctx-Compacted"] == "1"
    return client


def injected(body: dict[str, Any]) -> tuple[int, str]:
    """The index of the one message holding the injected memories, and their text."""
    found = [
        (i, b["text"])
        for i, m in enumerate(body["messages"])
        for b in blocks(m)
        if b.get("type") == "text" and HEADER in b["text"]
    ]
    assert len(found) == 1, found
    return found[0]


async def test_a_users_memories_reach_their_next_conversation(make_proxy: MakeProxy, claude: Claude) -> None:
    client = await remember(make_proxy, claude)
    question = [{"role": "user", "content": QUESTION}]
    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=100, messages=question, metadata={"user_id": "alice"}
    )
    assert (await raw.parse()).content[0].type == "text"
    sent = claude.fake.message_requests()[-1].json()
    check_shape(sent)
    where, text = injected(sent)
    assert "PostgreSQL 16" in text and int(raw.headers["X-Ctx-Memories"]) == text.count("\n- ") > 0
    assert where < len(sent["messages"]) and json.dumps(sent["messages"][-1]).count(QUESTION) == 1
    assert "You help" not in json.dumps(sent)  # the new conversation has its own (no) system prompt


async def test_the_x_ctx_user_header_names_the_user_and_others_see_nothing(
    make_proxy: MakeProxy, claude: Claude
) -> None:
    client = await remember(make_proxy, claude)
    question = [{"role": "user", "content": QUESTION}]
    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=100, messages=question, extra_headers={"X-Ctx-User": "alice"}
    )
    assert int(raw.headers["X-Ctx-Memories"]) > 0
    assert "PostgreSQL 16" in injected(claude.fake.message_requests()[-1].json())[1]
    assert "x-ctx-user" not in {k.lower() for k in claude.fake.message_requests()[-1].headers}

    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=100, messages=question, metadata={"user_id": "bob"}
    )
    assert raw.headers.get("X-Ctx-Memories") in (None, "0")
    assert HEADER not in json.dumps(claude.fake.message_requests()[-1].json())


async def test_memories_leave_a_tool_result_opening_its_user_turn(make_proxy: MakeProxy, claude: Claude) -> None:
    client = await remember(make_proxy, claude)
    calling = {"role": "assistant", "content": [{"type": "text", "text": "Searching."}, TOOL_USE]}
    for messages in (
        # The newest user text shares the result's turn.
        [
            {"role": "user", "content": "Look at the orders config."},
            calling,
            with_result({"type": "text", "text": QUESTION}),
        ],
        # The turn is only the result: the question is an earlier turn.
        [{"role": "user", "content": QUESTION}, calling, with_result()],
    ):
        raw = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=100, messages=messages, tools=TOOLS, metadata={"user_id": "alice"}
        )
        assert int(raw.headers["X-Ctx-Memories"]) > 0
        sent = claude.fake.message_requests()[-1].json()
        check_shape(sent)
        injected(sent)
        # Every block of the client's is forwarded, in its order and its role, with the memories.
        forwarded = [(m["role"], b) for m in sent["messages"] for b in blocks(m) if HEADER not in b.get("text", "")]
        assert forwarded == [(m["role"], b) for m in messages for b in blocks(m)]


def with_result(*more: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [RESULT, *more]}

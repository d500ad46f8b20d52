"""Long-term memory through the real proxy: cards written with each summary, searched with the
newest user message and injected before it — for the right tenant and user only."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.conftest import MakeProxy, Proxy, Upstream

HEADER = "## Relevant Memories"


def tenant(extra: str = "") -> str:
    return (
        """
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "rounds"
summarizer = "extractive"
[compaction.rounds]
full_context_turns = 1
cached_context_turns = 1
[memory]
enabled = true
"""
        + extra
    )


def conversation(first: str, reply: str, question: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": first},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "Thanks, and what about the cache layer?"},
        {"role": "assistant", "content": "Redis is fine for the cache layer."},
        {"role": "user", "content": question},
    ]


DECISION = conversation(
    "We decided to use PostgreSQL 16 for the orders service database.",
    "Good choice: PostgreSQL 16 it is for orders.",
    "Please write the migration plan.",
)
QUESTION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Which database version does the orders service use?"},
]


async def send(proxy: Proxy, messages: list[dict[str, Any]], path: str = "/v1", **extra: Any) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            proxy.url(f"{path}/chat/completions"), json={"model": "m", "messages": messages, **extra}
        )
        await resp.read()
        return resp


def injected(upstream: Upstream, index: int = -1) -> str | None:
    messages = upstream.fake.chat_requests()[index].json()["messages"]
    found = [m["content"] for m in messages if str(m.get("content", "")).startswith(HEADER)]
    assert len(found) <= 1
    if found:
        assert messages[-2]["content"] == found[0] and messages[-1]["role"] == "user"
    return found[0] if found else None


async def test_a_users_memory_reaches_their_next_conversation(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()})
    resp = await send(proxy, DECISION, user="alice")
    assert resp.headers.get("X-Ctx-Compacted") == "1"

    resp = await send(proxy, QUESTION, user="alice")
    memories = injected(upstream)
    assert memories is not None and "PostgreSQL 16" in memories
    assert resp.headers["X-Ctx-Memories"] == str(memories.count("\n- "))
    # The client's own messages are all still there, in order, around the injection.
    sent = upstream.fake.chat_requests()[-1].json()["messages"]
    assert [m for m in sent if m.get("name") != "memory_context"] == QUESTION


async def test_the_x_ctx_user_header_names_the_user_too(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()})
    await send(proxy, DECISION, user="alice")
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            proxy.url("/v1/chat/completions"),
            json={"model": "m", "messages": QUESTION},
            headers={"X-Ctx-User": "alice"},
        )
        assert resp.status == 200
    assert "PostgreSQL 16" in (injected(upstream) or "")
    assert "x-ctx-user" not in {k.lower() for k in upstream.fake.chat_requests()[-1].headers}


async def test_another_user_or_tenant_never_sees_them(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant(), "other": tenant()})
    await send(proxy, DECISION, user="alice")
    await send(proxy, QUESTION, user="bob")
    assert injected(upstream) is None
    await send(proxy, QUESTION, path="/t/other/v1", user="alice")
    assert injected(upstream) is None
    await send(proxy, QUESTION)  # no user at all: the memories of this new session only
    assert injected(upstream) is None
    await send(proxy, QUESTION, user="alice")
    assert injected(upstream) is not None


async def test_chinese_memories_are_found_by_ngrams(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()})
    chinese = conversation("我们最终决定GPU选型采用A100显卡。", "好的，GPU选型就定为A100。", "请写采购计划。")
    await send(proxy, chinese, user="li")
    await send(proxy, [{"role": "user", "content": "GPU 选型的结论是什么？"}], user="li")
    memories = injected(upstream)
    assert memories is not None and "A100" in memories


async def test_without_memory_nothing_is_injected(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant().replace("enabled = true", "enabled = false")})
    await send(proxy, DECISION, user="alice")
    resp = await send(proxy, QUESTION, user="alice")
    assert injected(upstream) is None and "X-Ctx-Memories" not in resp.headers
    assert upstream.fake.chat_requests()[-1].body == upstream.fake.chat_requests()[-1].body  # sanity
    assert upstream.fake.chat_requests()[-1].json()["messages"] == QUESTION


async def test_search_memory_tool_is_offered_when_there_are_memories(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant()})
    await send(proxy, DECISION, user="alice")
    upstream.fake.reply_json(
        tool_calls=[
            {"function": {"name": "ctxproxy_search_memory", "arguments": '{"query": "PostgreSQL orders", "top_k": 2}'}}
        ]
    )
    upstream.fake.reply_json("PostgreSQL 16.")
    resp = await send(proxy, [{"role": "user", "content": "hello again"}], user="alice")
    assert resp.status == 200
    first, second = (r.json() for r in upstream.fake.chat_requests()[-2:])
    assert [t["function"]["name"] for t in first["tools"]] == ["ctxproxy_search_memory"]
    answer = second["messages"][-1]
    assert answer["role"] == "tool" and "PostgreSQL 16" in answer["content"]
    assert answer["content"].startswith("1. [")

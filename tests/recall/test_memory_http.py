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
layered = false
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
    if found:  # a user message right before the client's newest
        assert messages[-2] == {"role": "user", "content": found[0]} and messages[-1]["role"] == "user"
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
    assert [*sent[:-2], sent[-1]] == QUESTION


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


def meaning(text: str) -> list[float]:
    """A toy embedding: databases on one axis, everything else on the other."""
    return [1.0, 0.0] if any(w in text for w in ("PostgreSQL", "relational engine")) else [0.0, 1.0]


async def test_embeddings_find_what_words_do_not(make_proxy: MakeProxy, upstream: Upstream) -> None:
    question = [{"role": "user", "content": "Which relational engine do we run?"}]  # no word in common
    with_vectors = tenant('inject_top_k = 1\nembeddings_model = "text-embedding-3-small"\n')
    proxy = await make_proxy({"default": with_vectors, "plain": tenant("inject_top_k = 1\n")})
    upstream.fake.embedder = meaning
    await send(proxy, DECISION, user="alice")
    await send(proxy, DECISION, path="/t/plain/v1", user="alice")
    embedded = [r.json()["input"] for r in upstream.fake.requests if r.path == "/v1/embeddings"]
    assert embedded and any("PostgreSQL 16" in text for text in embedded[0])  # cards, at write time

    await send(proxy, question, user="alice")
    assert "PostgreSQL 16" in (injected(upstream) or "")
    assert [r.json()["input"] for r in upstream.fake.requests if r.path == "/v1/embeddings"][-1] == [
        question[0]["content"]
    ]
    await send(proxy, question, path="/t/plain/v1", user="alice")
    assert injected(upstream) is None  # BM25 alone finds nothing


async def test_failing_embeddings_fall_back_to_bm25(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant('embeddings_model = "text-embedding-3-small"\n')})
    await send(proxy, DECISION, user="alice")  # no embedder: the fake answers something unusable
    resp = await send(proxy, QUESTION, user="alice")
    assert resp.status == 200 and "PostgreSQL 16" in (injected(upstream) or "")


async def test_layered_order_puts_scope_memory_after_the_system_prompt(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """Layered (note 002): the rounds a request finished go to the scope layer (each round's
    project facts, extracted after it), and a later request of the scope gets them in a
    ``## Scope Memory`` block right after the system prompt."""
    proxy = await make_proxy({"default": tenant().replace("layered = false", "layered = true")})
    async with aiohttp.ClientSession() as http:
        for messages in (DECISION, QUESTION):
            resp = await http.post(
                proxy.url("/v1/chat/completions"),
                json={"model": "m", "messages": messages},
                headers={"X-Ctx-User": "alice", "X-Ctx-Scope": "orders-team"},
            )
            assert resp.status == 200
            await proxy.settle()
    sent = upstream.fake.chat_requests()[-1].json()["messages"]
    assert sent[0] == QUESTION[0] and sent[-1] == QUESTION[-1]
    assert sent[1]["content"].startswith("## Scope Memory") and "PostgreSQL 16" in sent[1]["content"]
    # a teammate in the same scope sees it; outside the scope, nobody does
    async with aiohttp.ClientSession() as http:
        await http.post(
            proxy.url("/v1/chat/completions"),
            json={"model": "m", "messages": QUESTION},
            headers={"X-Ctx-User": "bob", "X-Ctx-Scope": "orders-team"},
        )
    assert "PostgreSQL 16" in upstream.fake.chat_requests()[-1].json()["messages"][1]["content"]
    await send(proxy, QUESTION, user="bob")
    forwarded = upstream.fake.chat_requests()[-1].json()["messages"]
    assert not any("PostgreSQL 16" in str(m["content"]) for m in forwarded)

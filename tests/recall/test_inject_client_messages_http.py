"""Auto-injection through the real proxy never removes or changes a message of the client's,
even one that looks like an injection (the user typed ``## Scope Memory``, the client's own
framework names a message ``memory_context``), and never stacks a second injection — not in
the proxy-tool loop's later rounds, not in an overflow retry. ``## Relevant Memories`` is a
``user`` message right before the client's newest (no assistant turn is made up)."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.conftest import MakeProxy, Proxy, Upstream

HEADER = "## Relevant Memories"
TENANT = """
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "rounds"
summarizer = "extractive"
[compaction.rounds]
full_context_turns = 2
cached_context_turns = 1
[memory]
enabled = true
layered = false
"""
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
DECISION = [  # three rounds: compacted (A + B = 3), which writes its memories
    SYSTEM,
    {"role": "user", "content": "We decided to use PostgreSQL 16 for the orders service database."},
    {"role": "assistant", "content": "Good choice: PostgreSQL 16 it is for orders."},
    {"role": "user", "content": "Thanks, and what about the cache layer?"},
    {"role": "assistant", "content": "Redis is fine for the cache layer."},
    {"role": "user", "content": "Please write the migration plan."},
]
OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in "
        "9120 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


async def send(proxy: Proxy, messages: list[dict[str, Any]], **extra: Any) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            proxy.url("/v1/chat/completions"), json={"model": "m", "messages": messages, "user": "alice", **extra}
        )
        assert resp.status == 200, await resp.text()
        return resp


def added_by_proxy(sent: list[dict[str, Any]], client: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The forwarded messages that are not the client's, asserting that every client message is
    there, unchanged and in order (``sent`` is ``client`` with messages inserted)."""
    rest, i = [], 0
    for message in sent:
        if i < len(client) and message == client[i]:
            i += 1
        else:
            rest.append(message)
    assert i == len(client), f"client message {i} was dropped or changed: {client[i]!r}"
    return rest


async def test_a_user_message_that_starts_with_a_memory_header_is_forwarded(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """The audit's repro: the upstream used to receive only the system message."""
    proxy = await make_proxy({"default": TENANT})
    await send(proxy, DECISION)
    for header in ("## Scope Memory", "## User Memory", HEADER):
        question = [SYSTEM, {"role": "user", "content": f"{header}\nPlease review PostgreSQL 16 notes for orders."}]
        resp = await send(proxy, question)
        sent = upstream.fake.chat_requests()[-1].json()["messages"]
        assert sent[-1] == question[-1] and sent[0] == SYSTEM
        [injection] = added_by_proxy(sent, question)
        assert injection["role"] == "user" and "name" not in injection and injection["content"].startswith(HEADER)
        assert "PostgreSQL 16" in injection["content"] and sent[-2] == injection
        assert resp.headers["X-Ctx-Memories"] == str(injection["content"].count("\n- "))


async def test_look_alikes_in_the_history_are_the_clients(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """A client with its own memory plugin (an assistant message named ``memory_context``) and a
    user who pasted a header: all of it reaches the model, layered or not. (Two rounds: below
    A + B, so nothing is compacted and the whole history is forwarded.) Layered, the decision
    reaches the scope layer after its round, and the scope's next request gets it first."""
    proxy = await make_proxy({"default": TENANT, "layered": TENANT.replace("layered = false", "layered = true")})
    history = [
        SYSTEM,
        {
            "role": "assistant",
            "name": "memory_context",
            "content": "## User Memory\n- (fact) from the client's own plugin",
        },
        {"role": "user", "content": "## Relevant Memories\n- I pasted this from somewhere."},
        {"role": "assistant", "name": "memory_context", "content": "Noted."},
        {"role": "user", "content": "Which PostgreSQL version does the orders service use?"},
    ]
    for path in ("/v1", "/t/layered/v1"):
        async with aiohttp.ClientSession() as http:
            for messages in (DECISION, history):
                body = {"model": "m", "messages": messages, "user": "alice"}
                resp = await http.post(
                    proxy.url(f"{path}/chat/completions"), json=body, headers={"X-Ctx-Scope": "orders"}
                )
                assert resp.status == 200
                await proxy.settle()
        sent = upstream.fake.chat_requests()[-1].json()["messages"]
        [added] = added_by_proxy(sent, history)
        assert "PostgreSQL 16" in added["content"]
        assert sent[-1] == history[-1]
        if path == "/v1":  # alice's memories, a user message before the question
            assert sent[-2] == added
            assert added == {"role": "user", "content": added["content"]} and added["content"].startswith(HEADER)
        else:  # the scope layer, right after the system prompt, ahead of the client's look-alike
            assert added["name"] == "memory_context"
            assert sent[1] == added and added["content"].startswith("## Scope Memory") and sent[2] == history[1]


async def test_the_tool_loop_does_not_stack_injections(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": TENANT})
    await send(proxy, DECISION)
    question = [SYSTEM, {"role": "user", "content": "## Scope Memory\nWhich PostgreSQL version for orders?"}]
    upstream.fake.reply_json(
        tool_calls=[{"function": {"name": "ctxproxy_search_memory", "arguments": '{"query": "PostgreSQL"}'}}]
    )
    upstream.fake.reply_json("PostgreSQL 16.")
    await send(proxy, question)
    first, second = (r.json()["messages"] for r in upstream.fake.chat_requests()[-2:])
    [injection] = added_by_proxy(first, question)
    # Round two: round one's list, then the model's call and ctxproxy's answer, nothing else.
    assert second[: len(first)] == first
    assert [m["role"] for m in second[len(first) :]] == ["assistant", "tool"]
    assert injection["content"].startswith(HEADER) and first[-2] == injection
    assert added_by_proxy(second, question) == [injection, *second[len(first) :]]


async def test_an_overflow_retry_injects_once_into_the_recompacted_list(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": TENANT})
    await send(proxy, DECISION)
    long = [
        SYSTEM,
        *[
            m
            for i in range(6)
            for m in (
                {"role": "user", "content": f"## User Memory\nStep {i}: tell me about the orders schema."},
                {"role": "assistant", "content": f"Step {i}: the orders table has columns id, total, status."},
            )
        ],
        {"role": "user", "content": f"{HEADER}\nWhich PostgreSQL version did we pick for orders?"},
    ]
    upstream.fake.reply_error(400, OVERFLOW)
    resp = await send(proxy, long)
    assert resp.headers.get("X-Ctx-Retried") == "1"
    retried = upstream.fake.chat_requests()[-1].json()["messages"]
    assert retried[0] == SYSTEM and retried[-1] == long[-1]
    injections = [m for m in retried if m.get("name") != "context_summary" and m not in long]
    assert injections == [retried[-2]] and "PostgreSQL 16" in injections[0]["content"]
    # Whatever was kept raw is the client's, unchanged, in order.
    kept = [m for m in retried[1:] if m.get("name") != "context_summary" and m != retried[-2]]
    assert kept == long[len(long) - len(kept) :]

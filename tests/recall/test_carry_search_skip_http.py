"""The memory search is skipped when its answer cannot change the request
(``ctxproxy.pipeline.augment._may_use``: no new ``## Relevant Memories`` block can be made — the
carried blocks used the budget, or the newest user message was asked before): through the real
proxy, a conversation forwards the same bodies (messages, tools) and answers with the same ``X-Ctx-*`` headers
as the same conversation, in a tenant of its own, with the search made at every request."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from ctxproxy.pipeline import augment
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.recall.test_inject_client_messages_http import TENANT as INJECTING

# note 001 with a budget that two memories use up (each given 25 tokens of its 50)
TENANT = INJECTING.replace("layered = false", "layered = false\ninject_top_k = 2\ninject_max_tokens = 50")
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
FACTS = [
    "We decided to use PostgreSQL 16 for the orders service database.",
    "The cache layer runs Redis 7 with a five minute expiry for orders.",
    "Deployments of the orders service go out every Tuesday morning.",
    "The billing service reads orders through the replica in Frankfurt.",
]
QUESTIONS = [
    "Which database does the orders service use?",
    "What expiry does the Redis cache for orders have?",
    "When do orders deployments go out?",
    "Which replica does billing read orders from?",
    "Remind me about PostgreSQL and Redis for orders.",  # sent twice: a retry
    "And the Tuesday deployments of orders?",
    "Summarise the orders decisions so far.",
]
VOLATILE = {"x-ctx-request-id", "x-ctx-session"}  # each tenant its own session


async def conversation(proxy: Proxy, upstream: Upstream, tenant: str) -> list[tuple[Any, dict[str, str]]]:
    """Every forwarded body (its messages and tools) and the answers' ``X-Ctx-*`` headers, request
    by request, of a conversation asking what an earlier one of the same user told (its cards, in their layer)."""
    told: list[dict[str, Any]] = [SYSTEM]
    for n, fact in enumerate(FACTS):
        told += [{"role": "user", "content": fact}, {"role": "assistant", "content": f"Noted ({n})."}]
    told.append({"role": "user", "content": "Thanks, that is all for now."})
    out: list[tuple[Any, dict[str, str]]] = []
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You answer questions about orders."}]
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url(f"/t/{tenant}/v1/chat/completions"), json={"model": "m", "messages": told, "user": "alice"}
        ) as resp:
            assert resp.status == 200, await resp.text()
        await proxy.settle()
        for n, question in enumerate(QUESTIONS):
            messages.append({"role": "user", "content": question})
            for _ in range(2 if "Remind" in question else 1):
                async with http.post(
                    proxy.url(f"/t/{tenant}/v1/chat/completions"),
                    json={"model": "m", "messages": messages, "user": "alice"},
                ) as resp:
                    assert resp.status == 200, await resp.text()
                    headers = {k.lower(): v for k, v in resp.headers.items() if k.lower().startswith("x-ctx")}
                    await resp.read()
                await proxy.settle()
                out.append((upstream.fake.chat_requests()[-1].json(), headers))
            messages.append({"role": "assistant", "content": f"Answer {n}."})
    return out


async def test_skipping_the_search_forwards_what_searching_forwards(
    make_proxy: MakeProxy, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await make_proxy({"default": TENANT, "always": TENANT, "skips": TENANT})
    searches = 0
    find = augment.find_memories

    async def counted(*args: Any) -> Any:
        nonlocal searches
        searches += 1
        return await find(*args)

    monkeypatch.setattr(augment, "find_memories", counted)
    with monkeypatch.context() as patched:
        patched.setattr(augment, "_may_use", lambda tenant, checked: True)
        always = await conversation(proxy, upstream, "always")
    assert searches == len(always) + 1  # and the earlier conversation's request
    searches = 0
    skips = await conversation(proxy, upstream, "skips")
    skipped = len(skips) + 1 - searches
    assert searches > 1 and skipped >= 2  # made, and skipped: for the retry and for a used budget
    assert any("## Relevant Memories" in str(sent) for sent, _ in skips)  # memories were injected
    assert all("ctxproxy_search_memory" in str(sent.get("tools")) for sent, _ in skips)  # and the tool offered
    for (sent_always, headers_always), (sent_skips, headers_skips) in zip(always, skips, strict=True):
        assert sent_skips == sent_always
        assert {k: v for k, v in headers_skips.items() if k not in VOLATILE} == {
            k: v for k, v in headers_always.items() if k not in VOLATILE
        }

"""Memory on by default (note 001) through the real proxy, for a ``rolling_summary`` tenant that
says nothing about memory: its summaries' cards are kept, ``search_memory`` is offered once there
is something to find, and a user's next conversation gets them injected — while a request with
nothing to find or inject is forwarded byte for byte, and ``[memory] enabled = false`` turns it
all off."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai

from tests.conftest import MakeProxy, Proxy, Upstream

MODEL = "ctx-test-model"
TENANT = """
default_context_window = 2000
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "rolling_summary"
summarizer = "extractive"
summary_max_tokens = 200
[compaction.rolling_summary]
target_ratio = 0.5
headroom_ratio = 0.05
headroom_min_tokens = 0
summary_max_tokens = 200
"""
OFF = TENANT + "[memory]\nenabled = false\n"
SYSTEM = {"role": "system", "content": "You help a bakery."}
QUESTION = [SYSTEM, {"role": "user", "content": "Which starter did we choose for the Saturday rye loaves?"}]


def history(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [SYSTEM]
    for n in range(1, turns + 1):
        asked = (
            f"Order {n}: the customer wants {n + 2} loaves for Saturday at {n % 9 + 8}:30. We decided to use the "
            f"rye starter Greta for order {n}. The delivery van must leave by {n % 9 + 7}:15."
        )
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": f"Confirmed order {n}."}]
    return [*messages, {"role": "user", "content": "Anything else for Saturday?"}]


async def ask(proxy: Proxy, messages: list[dict[str, Any]], path: str = "/v1", user: str = "alice") -> Any:
    async with openai.AsyncOpenAI(base_url=proxy.url(path), api_key="sk-test", max_retries=0) as client:
        return await client.chat.completions.with_raw_response.create(model=MODEL, messages=messages, user=user)  # type: ignore[arg-type]


def tool_names(upstream: Upstream) -> list[str]:
    return [t["function"]["name"] for t in upstream.fake.chat_requests()[-1].json().get("tools", [])]


async def test_a_summarising_strategy_keeps_memories_without_being_told(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """Note 001: "enable_memory_injection：是否自动注入记忆（默认 True）", and "MaxAgent 默认注册了
    search_memory 工具" — here offered whenever there is something to find."""
    proxy = await make_proxy({"default": TENANT, "off": OFF})
    assert proxy.holder.current.tenants["default"].memory.enabled
    raw = await ask(proxy, history(30))
    assert raw.headers["X-Ctx-Compacted"] == "1"

    raw = await ask(proxy, QUESTION)  # alice's next conversation
    sent = upstream.fake.chat_requests()[-1].json()["messages"]
    assert sent[-2]["role"] == "user" and sent[-2]["content"].startswith("## Relevant Memories")
    assert "Greta" in sent[-2]["content"] and sent[-1] == QUESTION[-1]
    assert int(raw.headers["X-Ctx-Memories"]) == sent[-2]["content"].count("\n- ") > 0
    assert tool_names(upstream) == ["ctxproxy_search_memory"]

    await ask(proxy, QUESTION, user="bob")  # bob has nothing to find: no tool, nothing injected
    assert "tools" not in upstream.fake.chat_requests()[-1].json()


async def test_off_per_tenant(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """``[memory] enabled = false``: no cards, no injection, no ``search_memory``."""
    proxy = await make_proxy({"default": OFF})
    assert (await ask(proxy, history(30))).headers["X-Ctx-Compacted"] == "1"
    raw = await ask(proxy, QUESTION)
    assert "X-Ctx-Memories" not in raw.headers and "tools" not in upstream.fake.chat_requests()[-1].json()
    assert upstream.fake.chat_requests()[-1].json()["messages"] == QUESTION


async def test_nothing_to_inject_is_forwarded_byte_for_byte(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """Memory on, but nothing to find yet: the upstream gets the client's own bytes."""
    proxy = await make_proxy({"default": TENANT})
    body = json.dumps({"model": MODEL, "messages": QUESTION, "user": "carol"}, indent=1).encode()
    async with aiohttp.ClientSession() as http:
        headers = {"Content-Type": "application/json", "X-Ctx-Scope": "bakery"}
        async with http.post(proxy.url("/v1/chat/completions"), data=body, headers=headers) as resp:
            assert resp.status == 200
    assert upstream.fake.chat_requests()[-1].body == body

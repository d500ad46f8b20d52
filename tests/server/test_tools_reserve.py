"""Compaction keeps exactly the room ctxproxy's tool definitions take — the definitions this request
is offered, under its names, counted with its model — and the client's own tool definitions:
a prompt that fills the window to the brim with them is forwarded as it is, one token more is
compacted, and the upstream never gets a prompt over the window by ctxproxy's count."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from ctxproxy.session import message_digest
from ctxproxy.tokens import TokenCounter
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.recall.paged import RECALL, SEARCH, paged_history

WINDOW = 16_384
TENANT = f"""
[upstream]
base_url = "{{upstream}}"
[compaction]
strategy = "paged"
summarizer = "extractive"
[compaction.paged]
active_pages = 2
archive_batch = 1
[models."brim"]
context_window = {WINDOW}
[memory]
enabled = false  # the archive's tools alone (no memory cards to inject, no room kept for them)
"""
COUNTER = TokenCounter()
# Long pages: archiving one more page shrinks the prompt (its Contents Page line is shorter).
FACTS = tuple(f"Fact {i}: " + " ".join(f"detail{i}x{j}" for j in range(60)) for i in range(5))


def client_tool(name: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {"q": {"type": "string"}}}
    return {"type": "function", "function": {"name": name, "description": "the client's own", "parameters": parameters}}


def counted(request: dict[str, Any]) -> int:
    """A forwarded request as ctxproxy counts a prompt: messages, reply priming, the client's tool
    definitions and its own (the last two: ours always come after the client's)."""
    messages = sum(COUNTER.count_message(m, message_digest(m)) for m in request["messages"]) + 3
    tools = request["tools"]
    return messages + COUNTER.count_tools(tools[:-2]) + COUNTER.count_tools(tools[-2:])


async def ask(proxy: Proxy, body: dict[str, Any]) -> int:
    """X-Ctx-Tokens-After of one request (answered by the fake's echo)."""
    async with aiohttp.ClientSession() as http, http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
        assert resp.status == 200, await resp.text()
        return int(resp.headers["X-Ctx-Tokens-After"])


@pytest.mark.parametrize("clash", [False, True], ids=["default_names", "renamed_on_clash"])
async def test_tool_definitions_fit_a_prompt_filled_to_the_brim(
    make_proxy: MakeProxy, upstream: Upstream, clash: bool
) -> None:
    proxy = await make_proxy({"default": TENANT})
    # A client tool; with the name of one of ours, ours are renamed (a longer name, a longer Contents Page).
    tools = [client_tool(RECALL if clash else "lookup")]
    body = {"model": "brim", "messages": paged_history(5, FACTS), "tools": tools, "max_tokens": 100}

    full = await ask(proxy, body)  # archives the older pages; the window is far from full
    archived = upstream.fake.chat_requests()[0].json()
    offered = [t["function"]["name"] for t in archived["tools"][1:]]
    assert offered == ([RECALL + "_", SEARCH] if clash else [RECALL, SEARCH])
    assert counted(archived) == full

    # The same prompt, with the answer's reserve leaving exactly `full` tokens: it fits as it is.
    brim = await ask(proxy, {**body, "max_tokens": WINDOW - full})
    at_brim = upstream.fake.chat_requests()[1].json()
    assert brim == full and at_brim["messages"] == archived["messages"] and at_brim["tools"] == archived["tools"]

    # One token less room: compacted further, and what is forwarded fits, definitions included.
    over = await ask(proxy, {**body, "max_tokens": WINDOW - full + 1})
    tighter = upstream.fake.chat_requests()[2].json()
    assert tighter["messages"] != archived["messages"] and tighter["tools"] == archived["tools"]
    assert counted(tighter) == over <= full - 1

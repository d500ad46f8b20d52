"""Two anonymous conversations that share a session key, for the isolation tests.

Neither client sends a ``user``, ``X-Ctx-User``, ``X-Ctx-Scope`` or ``X-Session-Id``, and both
open with the same system prompt and "Hi" (and get the same greeting back), so ctxproxy derives
the same session key for both. Alice then tells a PIN and an e-mail address; Bob talks about
something else. Each conversation is played turn by turn, as a client would send it, so its
older turns are compacted (archived as pages with ``PAGED``, summarised with ``ROUNDS``) and
its memories written before the final question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import orjson

from tests.conftest import Proxy, Upstream
from tests.recall.paged import RECALL, SEARCH

PIN = "4417"
EMAIL = "ada.lovelace@example.org"
SECRETS = (PIN, EMAIL)

# One page archived per request, as the note's rule is (optimise = "tokens"; with "cost" a
# request right after an archival does not archive again while its prompt fits).
PAGED = """
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "paged"
summarizer = "extractive"
optimise = "tokens"
[compaction.paged]
active_pages = 2
archive_batch = 1
[memory]
enabled = true
"""
ROUNDS = """
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
TENANTS = {"paged": PAGED, "rounds": ROUNDS}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


OPENING = [
    {"role": "system", "content": "You are a helpful assistant."},
    user("Hi"),
    assistant("Hello! How can I help you today?"),
]
ALICE = [
    *OPENING,
    user(f"My bank card PIN is {PIN}, please remember it."),
    assistant(f"Noted: your PIN is {PIN}."),
    user(f"My e-mail address is {EMAIL} for the bank statements."),
    assistant(f"Noted: statements go to {EMAIL}."),
    user("The weather is lovely this afternoon."),
    assistant("It is, enjoy it."),
]
BOB = [
    *OPENING,
    user("I am planning a cycling trip to Lisbon in May."),
    assistant("Lisbon in May is lovely for cycling."),
    user("My bike is the blue touring one with panniers."),
    assistant("A touring bike is a good choice."),
    user("The ferry across the Tagus takes bikes too."),
    assistant("It does, for a small fee."),
]
QUESTION = user("What are my PIN and my e-mail address for the bank?")


async def post(
    proxy: Proxy, messages: Sequence[Mapping[str, Any]], headers: Mapping[str, str] | None = None, **body: Any
) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            proxy.url("/v1/chat/completions"),
            json={"model": "m", "messages": list(messages), **body},
            headers=dict(headers or {}),
        )
        await resp.read()
        assert resp.status == 200, await resp.text()
        return resp


async def play(
    proxy: Proxy, history: Sequence[Mapping[str, Any]], headers: Mapping[str, str] | None = None, **body: Any
) -> None:
    """Send ``history`` as its client would: one request per user turn, each with everything before it."""
    for end, message in enumerate(history, 1):
        if message["role"] == "user":
            await post(proxy, history[:end], headers, **body)


def last_forwarded(upstream: Upstream, index: int = -1) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = upstream.fake.chat_requests()[index].json()["messages"]
    return messages


def leaked(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


def search_call(query: str) -> dict[str, Any]:
    return {"function": {"name": SEARCH, "arguments": orjson.dumps({"query": query, "top_k": 10}).decode()}}


def recall_call(page: int) -> dict[str, Any]:
    return {"function": {"name": RECALL, "arguments": orjson.dumps({"page_index": page}).decode()}}


def tool_answer(upstream: Upstream) -> str:
    """ctxproxy's answer to the model's one tool call, as the upstream's second round got it."""
    answer = last_forwarded(upstream)[-1]
    assert answer["role"] == "tool"
    return str(answer["content"])


def contents_page(upstream: Upstream, index: int = -1) -> str | None:
    found = [
        m["content"] for m in last_forwarded(upstream, index) if str(m.get("content")).startswith("## Contents Page")
    ]
    return found[0] if found else None

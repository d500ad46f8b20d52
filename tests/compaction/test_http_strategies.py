"""Each strategy end to end over HTTP, with options small enough that it compacts in a few turns.

What reached the fake upstream is compared with what the client sent: the summary message the
strategy makes (``## Context Summary`` for the rolling ones, ``## Session Memory`` for rounds),
where it is placed (``summary_placement``), and the raw tail that follows it — always the client's
own messages, tool calls never separated from their results. ``none`` forwards the client's bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from multidict import CIMultiDict

from ctxproxy.services import STORE, TASKS
from ctxproxy.session import SessionKey, message_digest
from ctxproxy.store.keys import checkpoints_key
from ctxproxy.tokens import TokenCounter
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.fakes.upstream import Recorded

MODEL = "ctx-test-model"  # in no built-in table: the tenant's default_context_window applies
SYSTEM = {"role": "system", "content": "You are a careful assistant for a small bakery."}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look something up in the bakery's records.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]

BASE = """
default_context_window = {window}
[upstream]
base_url = "{{upstream}}"
[compaction]
strategy = "{strategy}"
summarizer = "extractive"
summary_max_tokens = 200
summary_placement = "{placement}"
"""
OPTIONS = {
    "sliding_window": """
[compaction.sliding_window]
context_size = 10
tail_keep_size = 4
compression_window_size = 3
compression_hard_limit = 5
""",
    "rolling_summary": """
[compaction.rolling_summary]
threshold = 0.8
target_ratio = 0.5
headroom_ratio = 0.05
headroom_min_tokens = 0
min_messages_to_keep = 4
summary_max_tokens = 200
""",
    "rounds": """
[compaction.rounds]
full_context_turns = 2
cached_context_turns = 2
""",
    "cut_point": """
[compaction.cut_point]
reserve_tokens = 300
keep_recent_tokens = 500
""",
    "none": "",
}
WINDOW = 2000
COUNTER = TokenCounter()


# Compaction alone: no memory cards, injection or search tool (memory is on by default for most).
MEMORY_OFF = "[memory]\nenabled = false\n"


def tenant(strategy: str, placement: str = "assistant_named", window: int = WINDOW) -> str:
    return BASE.format(window=window, strategy=strategy, placement=placement) + OPTIONS[strategy] + MEMORY_OFF


def user(turn: int) -> dict[str, Any]:
    return {
        "role": "user",
        "content": f"Order {turn}: the customer wants {turn + 2} sourdough loaves for Saturday at {turn % 9 + 8}:30. "
        f"We decided to use the rye starter for order {turn}. The delivery van must leave by {turn % 9 + 7}:15. "
        "Can you confirm the order and draft a short reply?",
    }


@dataclass
class Turn:
    sent: list[dict[str, Any]]
    headers: Mapping[str, str]
    forwarded: Recorded
    reply: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.forwarded.json()["messages"]

    @property
    def summarized(self) -> int | None:
        value = self.headers.get("X-Ctx-Summarized")
        return None if value is None else int(value)

    @property
    def compacted(self) -> bool:
        return self.headers.get("X-Ctx-Compacted") == "1"


class Client:
    def __init__(self, proxy: Proxy, upstream: Upstream, http: aiohttp.ClientSession, tenant: str = "default") -> None:
        self.proxy, self.upstream, self.http, self.tenant = proxy, upstream, http, tenant

    async def send(self, messages: list[dict[str, Any]], **extra: Any) -> Turn:
        return await self.send_as(messages, MODEL, **extra)

    async def send_as(self, messages: list[dict[str, Any]], model: str, **extra: Any) -> Turn:
        seen = len(self.upstream.fake.chat_requests())
        body = {"model": model, **extra, "messages": messages}
        async with self.http.post(self.proxy.url(f"/t/{self.tenant}/v1/chat/completions"), json=body) as resp:
            assert resp.status == 200, await resp.text()
            data = await resp.json()
            headers = CIMultiDict(resp.headers)
        # Let the engine's follow-up work (the pending-request check) end before the next turn, as
        # it does for a human-paced client; the race it otherwise causes has its own test in
        # test_http_single_flight.py.
        await self.proxy.server.app[TASKS].drain(5)
        requests = self.upstream.fake.chat_requests()
        assert len(requests) == seen + 1  # the extractive summariser never calls the upstream
        return Turn(list(messages), headers, requests[-1], data["choices"][0]["message"])

    async def converse(self, turns: int, *, with_tools: bool = False) -> list[Turn]:
        """A stateless client: each turn resends everything, then appends the answer."""
        history: list[dict[str, Any]] = [SYSTEM]
        played = []
        for n in range(1, turns + 1):
            message = user(n)
            if with_tools:
                message["content"] += " CALL_TOOL:lookup"
            history.append(message)
            turn = await self.send(history, **({"tools": TOOLS} if with_tools else {}))
            played.append(turn)
            reply = {"role": "assistant", "content": turn.reply["content"]}
            if turn.reply.get("tool_calls"):
                calls = turn.reply["tool_calls"]
                history.append({**reply, "tool_calls": calls})
                for call in calls:
                    history.append(
                        {
                            "role": "tool",
                            "tool_call_id": call["id"],
                            "content": f"Record {n}: paid in full, pickup at the back door.",
                        }
                    )
                # The final answer of the turn (the fake echoes the last user message).
                turn = await self.send(history, tools=TOOLS)
                played.append(turn)
                reply = {"role": "assistant", "content": turn.reply["content"]}
            history.append(reply)
        return played


def summaries(turn: Turn) -> list[dict[str, Any]]:
    """The summary messages of ``[system] [summary ...] [client's messages from X-Ctx-Summarized]``."""
    assert turn.summarized is not None
    return turn.messages[1 : len(turn.messages) - (len(turn.sent) - turn.summarized)]


def check_tail(turn: Turn, *, smaller: bool = True) -> dict[str, Any]:
    """The forwarded list is ``[system] [summary] [client's messages from X-Ctx-Summarized]``; the
    summary (as one message: ``rounds`` sends one per Session Memory block, alike but for their
    text). ``smaller``: the prompt shrank (not so for a message-counting strategy's first small
    batches)."""
    forwarded = turn.messages
    end = turn.summarized
    assert end is not None
    assert forwarded[0] == SYSTEM
    shown = summaries(turn)
    assert shown and forwarded[1 + len(shown) :] == turn.sent[end:]
    assert forwarded[-1] == turn.sent[-1]
    assert all({**m, "content": ""} == {**shown[0], "content": ""} for m in shown)
    if smaller:
        assert int(turn.headers["X-Ctx-Tokens-After"]) < int(turn.headers["X-Ctx-Tokens-Before"])
    check_counts(turn)
    return {**shown[0], "content": "\n\n".join(m["content"] for m in shown)}


def check_counts(turn: Turn) -> None:
    """X-Ctx-Tokens-Before / -After count exactly what the client sent / what was forwarded."""
    body = turn.forwarded.json()
    tools = COUNTER.count_tools(body.get("tools"), body["model"])
    for messages, header in ((turn.sent, "X-Ctx-Tokens-Before"), (turn.messages, "X-Ctx-Tokens-After")):
        counted = COUNTER.count_messages(messages, [message_digest(m) for m in messages], body["model"])
        assert counted + tools == int(turn.headers[header]), header


def tool_pairs_intact(messages: list[dict[str, Any]]) -> bool:
    """Every tool result answers a call just before it, every call is answered before the next turn."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            if message["tool_call_id"] not in open_calls:
                return False
            open_calls.discard(message["tool_call_id"])
        else:
            if open_calls:
                return False
            open_calls = {c["id"] for c in message.get("tool_calls") or []}
    return not open_calls


# ------------------------------------------------------------------------------------------------


async def test_sliding_window_consolidates_in_batches_of_messages(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant("sliding_window")})
    async with aiohttp.ClientSession() as http:
        turns = await Client(proxy, upstream, http).converse(12)
    assert {t.headers["X-Ctx-Strategy"] for t in turns} == {"sliding_window"}
    compacting = [t for t in turns if t.compacted]
    assert len(compacting) >= 3
    # Nothing before total − tail_keep_size − last_consolidated reaches compression_window_size.
    first = turns.index(compacting[0])
    assert all(t.summarized is None for t in turns[:first])
    assert len(turns[first].sent) - 4 - 1 >= 3 > len(turns[first - 1].sent) - 4 - 1
    for turn in turns[first:]:
        summary = check_tail(turn, smaller=False)
        assert summary["role"] == "assistant" and summary["name"] == "context_summary"
        assert summary["content"].startswith("## Context Summary\n")
        raw = len(turn.sent) - (turn.summarized or 0)
        assert 4 <= raw < 4 + 3 + 2  # tail_keep_size kept; at most a window (+ one turn) more
        if turn.compacted:
            assert raw == 4  # the batch ends exactly tail_keep_size before the end
    assert turns[-1].summarized == compacting[-1].summarized
    check_tail(turns[-1])  # by now the summary stands for far more than it costs


async def test_rolling_summary_rolls_one_summary_and_stays_under_the_threshold(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": tenant("rolling_summary")})
    async with aiohttp.ClientSession() as http:
        turns = await Client(proxy, upstream, http).converse(30)
    compacting = [t for t in turns if t.compacted]
    assert len(compacting) >= 2
    for turn in turns:
        before, after = int(turn.headers["X-Ctx-Tokens-Before"]), int(turn.headers["X-Ctx-Tokens-After"])
        assert after < 0.8 * WINDOW  # a compaction leaves the prompt under the level that triggers one
        if turn.summarized is None:
            assert turn.messages == turn.sent and before == after
            continue
        summary = check_tail(turn)
        assert summary == {"role": "assistant", "name": "context_summary", "content": summary["content"]}
        content = summary["content"]
        assert content.startswith("## Context Summary\n")
        # Rolling, never stacked: one header, one set of sections however many compactions ran.
        assert content.count("## Context Summary") == 1
        assert content.count("### Goal") == 1
        assert len(turn.sent) - turn.summarized >= 4  # min_messages_to_keep
    # The newest summary still remembers the first compaction's range (merged, not replaced).
    last = check_tail(turns[-1])["content"]
    assert "Order 1:" in last


async def test_rounds_sends_session_memory_blocks_oldest_first(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": tenant("rounds")})
    async with aiohttp.ClientSession() as http:
        turns = await Client(proxy, upstream, http).converse(10)
    # A = 2, B = 2: the first compression when 4 rounds are uncompressed (turn 4), then every 2 turns.
    assert [i + 1 for i, t in enumerate(turns) if t.compacted] == [4, 6, 8, 10]
    assert all(t.summarized is None for t in turns[:3])
    for turn in turns[3:]:
        memory = check_tail(turn)
        assert memory["role"] == "assistant" and memory["name"] == "context_summary"
        assert memory["content"].startswith("## Session Memory\n")
        tail = turn.messages[1 + len(summaries(turn)) :]
        assert tail[0]["role"] == "user"  # a block ends where a round begins
        assert 2 <= sum(m["role"] == "user" for m in tail) <= 3  # A..A+B−1 uncompressed rounds
    final = check_tail(turns[-1])["content"]
    # Four blocks of two rounds (four messages) each, oldest first, never merged.
    sections = [line for line in final.splitlines() if line.startswith("### Messages ")]
    assert sections == ["### Messages 2-5", "### Messages 6-9", "### Messages 10-13", "### Messages 14-17"]
    assert final.index("Order 1:") < final.index("Order 3:") < final.index("Order 7:")
    # One message per block, each compression appending one: the messages already sent keep their bytes.
    shown = [summaries(turn) for turn in turns[3:]]
    assert [len(messages) for messages in shown] == [1, 1, 2, 2, 3, 3, 4]
    assert all(later[: len(earlier)] == earlier for earlier, later in zip(shown, shown[1:], strict=False))


@pytest.mark.parametrize("strategy", ["sliding_window", "rolling_summary", "rounds", "cut_point"])
async def test_tool_calls_are_never_separated_from_their_results(
    strategy: str, make_proxy: MakeProxy, upstream: Upstream
) -> None:
    proxy = await make_proxy({"default": tenant(strategy)})
    async with aiohttp.ClientSession() as http:
        turns = await Client(proxy, upstream, http).converse(14, with_tools=True)
    assert any(t.compacted for t in turns)
    assert any(m["role"] == "tool" for m in turns[-1].sent)
    for turn in turns:
        assert tool_pairs_intact(turn.sent)
        assert tool_pairs_intact(turn.messages), json.dumps(turn.messages[:4])[:400]
        if turn.summarized is not None:
            check_tail(turn, smaller=strategy != "sliding_window")
            assert turn.messages[2]["role"] != "tool"


async def test_summary_placement_changes_only_the_summary_messages_role_and_name(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    placements = ["assistant_named", "assistant", "user", "system"]
    proxy = await make_proxy({p: tenant("rolling_summary", placement=p) for p in placements})
    played: dict[str, list[Turn]] = {}
    async with aiohttp.ClientSession() as http:
        for placement in placements:
            played[placement] = await Client(proxy, upstream, http, tenant=placement).converse(20)
    reference = played["assistant_named"]
    assert sum(t.compacted for t in reference) >= 2
    expected_role = {"assistant_named": "assistant", "assistant": "assistant", "user": "user", "system": "system"}
    for placement, turns in played.items():
        assert [t.summarized for t in turns] == [t.summarized for t in reference]
        # Each tenant made its own checkpoints (nothing is shared across tenants).
        assert [t.compacted for t in turns] == [t.compacted for t in reference]
        for turn, ref in zip(turns, reference, strict=True):
            if turn.summarized is None:
                assert turn.messages == ref.messages
                continue
            summary, ref_summary = turn.messages[1], ref.messages[1]
            assert summary["content"] == ref_summary["content"]
            assert summary["role"] == expected_role[placement]
            assert ("name" in summary) == (placement == "assistant_named")
            assert turn.messages[:1] + turn.messages[2:] == ref.messages[:1] + ref.messages[2:]


async def test_none_forwards_the_clients_bytes_unchanged(make_proxy: MakeProxy, upstream: Upstream) -> None:
    # A window it fits: a prompt over the window is compacted even under `none` (pre-flight,
    # tests/recovery/test_overflow_retry.py).
    proxy = await make_proxy({"default": tenant("none", window=100_000)})
    history: list[dict[str, Any]] = [SYSTEM]
    for n in range(1, 16):
        history += [user(n), {"role": "assistant", "content": "echo: " + user(n)["content"]}]
    history.append(user(16))
    # Unusual but valid JSON: spacing, escapes, key order, fields ctxproxy has never heard of.
    body = (
        '{ "messages" :'
        + json.dumps(history, ensure_ascii=True, indent=1)
        + ',\n "model":"'
        + MODEL
        + '", "x_unknown": {"nested": [1, 2.50, null]}, "temperature": 0.7 }'
    ).encode()
    async with aiohttp.ClientSession() as http:
        for _ in range(2):
            async with http.post(
                proxy.url("/v1/chat/completions"), data=body, headers={"Content-Type": "application/json"}
            ) as resp:
                assert resp.status == 200, await resp.text()
                headers = resp.headers
                await resp.read()
            assert upstream.fake.chat_requests()[-1].body == body
            assert headers["X-Ctx-Strategy"] == "none"
            assert int(headers["X-Ctx-Tokens-Before"]) > 1024
            assert headers["X-Ctx-Tokens-After"] == headers["X-Ctx-Tokens-Before"]
            assert "X-Ctx-Summarized" not in headers and "X-Ctx-Compacted" not in headers
    key = SessionKey("default", headers["X-Ctx-Session"], "derived")
    assert await proxy.server.app[STORE].get(checkpoints_key(key)) is None  # no checkpoint was ever made


async def test_the_window_comes_from_the_models_glob_and_reserves_the_requests_max_tokens(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    text = tenant("cut_point", window=100_000) + '\n[models."tiny-*"]\ncontext_window = 2000\n'
    proxy = await make_proxy({"default": text})
    history: list[dict[str, Any]] = [SYSTEM]
    for n in range(1, 14):
        history += [user(n), {"role": "assistant", "content": "echo: " + user(n)["content"]}]
    history.append(user(14))
    async with aiohttp.ClientSession() as http:
        client = Client(proxy, upstream, http)
        big = await client.send_as(history, "big-model", max_tokens=400)
        tiny = await client.send_as(history, "tiny-1")
        tiny_reserving = await client.send_as(history, "tiny-1", max_completion_tokens=400)
    size = int(big.headers["X-Ctx-Tokens-Before"])
    assert 2000 - 400 - 300 < size <= 2000 - 300  # only the reservation makes it cross the threshold
    assert big.summarized is None and big.messages == history  # a 100k window: nothing to do
    assert tiny.summarized is None and tiny.messages == history  # 2000-token window, fits the threshold
    assert tiny_reserving.compacted  # 2000 − 400 reserved for the answer: over the threshold
    check_tail(tiny_reserving)
    assert tiny_reserving.forwarded.json()["max_completion_tokens"] == 400

"""The fake upstream's summary calls, told apart from the users' calls, counted and held on demand;
and the tenant and conversation the tests of replicas on Redis share.

Every replica in these tests summarises through the same fake upstream (``tests/fakes/upstream.py``),
so its count of summary calls is the number of compactions all replicas together ran. A summary
call is recognised by its system prompt (``ctxproxy.summarize.prompts.system_prompt``); it is
answered with a well-formed summary whose facts become memory cards, after ``gate`` is set when
one is given (the compaction then hangs in its summariser for as long as the test wants). Every
other chat call gets the fake's default answer (the echo model).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from ctxproxy.summarize.prompts import system_prompt
from tests.fakes.serving import GATE_TIMEOUT
from tests.fakes.upstream import CHAT_PATH, FakeUpstream

SUMMARY_MAX_TOKENS = 300
FACT = "The orders service runs on PostgreSQL 16 in region eu-west-3."
MODEL = "ctx-test-model"  # in no built-in table: the tenant's default_context_window applies


def tenant(summary_timeout: float, *, memory: bool = False, reserve: int = 500, keep: int = 800) -> str:
    """A tenant that compacts with ``cut_point`` at 3,000 tokens, summarising with the LLM (one call
    per summary: its window holds any range); ``{upstream}`` stands for the fake's base URL."""
    return f"""
default_context_window = 3000
[upstream]
base_url = "{{upstream}}"
[compaction]
strategy = "cut_point"
summarizer = "llm"
summary_timeout = {summary_timeout}
summary_max_tokens = {SUMMARY_MAX_TOKENS}
summary_context_window = 32000
[compaction.cut_point]
reserve_tokens = {reserve}
keep_recent_tokens = {keep}
[memory]
enabled = {str(memory).lower()}
"""


def leg(n: int, words: int = 0) -> dict[str, Any]:
    """The user's message of turn ``n`` (``words``: that many more sentences of padding)."""
    text = f"Leg {n}: the train from city {n} leaves at {n % 12 + 6}:10 from platform {n}; seat {n}A is booked."
    return {"role": "user", "content": text + " More details follow." * words}


def conversation(legs: int) -> list[dict[str, Any]]:
    """A history of ``legs`` turns (the echo model's answers) and a new question."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful travel agent."}]
    for n in range(1, legs + 1):
        asked = leg(n)
        messages += [asked, {"role": "assistant", "content": "echo: " + asked["content"]}]
    return messages + [{"role": "user", "content": f"Now plan leg {legs + 1}, please."}]


Behaviour = Callable[[Any], Awaitable[web.StreamResponse]]


def summary_text(n: int) -> str:
    return f"### Goal\n- plan the rail trip (summary {n})\n\n### Key facts\n- {FACT}\n- Summary number {n} was made."


class Summaries:
    def __init__(self, fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fake = fake
        self._take = fake._take_behaviour
        self.calls = 0
        self.prompts: list[str] = []  # each summary call's prompt (its last message), in order
        self.arrived = asyncio.Event()  # set by every summary call as it arrives
        self.gates: dict[int, asyncio.Event] = {}  # summary call number (1-based) -> its gate
        monkeypatch.setattr(fake, "_take_behaviour", self._choose)

    def hold(self, call: int) -> asyncio.Event:
        """The ``call``-th summary call waits until the returned event is set."""
        return self.gates.setdefault(call, asyncio.Event())

    async def wait_for(self, calls: int, timeout: float = 20) -> None:
        async def enough() -> None:
            while self.calls < calls:
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(enough(), timeout)

    def _choose(self, path: str) -> Behaviour | None:
        return self._dispatch if path == CHAT_PATH else self._take(path)

    async def _dispatch(self, ctx: Any) -> web.StreamResponse:
        messages = ctx.payload().get("messages") or []
        if not (messages and messages[0].get("content") == system_prompt(SUMMARY_MAX_TOKENS)):
            return await ctx.default(ctx)
        self.calls += 1
        self.prompts.append(str(messages[-1].get("content")))
        number = self.calls
        self.arrived.set()
        gate = self.gates.get(number)
        if gate is not None:
            await asyncio.wait_for(gate.wait(), GATE_TIMEOUT * 3)
        self.fake.reply_json(summary_text(number))
        reply = self._take(CHAT_PATH)
        assert reply is not None
        return await reply(ctx)

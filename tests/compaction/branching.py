"""A conversation that forks, and a stateless client that plays it through the proxy with the
``openai`` SDK: shared by the branch summary tests.

Every user message names its day and its city, so what a branch summary says can be traced to
the messages it came from: the old branch plans days in Lisbon, the new one in Porto.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import openai
from multidict import CIMultiDict

from ctxproxy.services import TASKS
from ctxproxy.strategies.branch import BRANCH_HEADER
from tests.conftest import Proxy, Upstream
from tests.fakes.upstream import Recorded

MODEL = "ctx-test-model"  # in no built-in table: the tenant's default_context_window applies
SYSTEM = {"role": "system", "content": "You are a careful travel planner."}
Messages = list[dict[str, Any]]


def ask(day: int, city: str = "Lisbon") -> dict[str, Any]:
    return {
        "role": "user",
        "content": f"Day {day} in {city}: we want to see the {city} museum number {day}, book a table at the "
        f"{city} harbour restaurant for {day % 5 + 2} people at {day % 4 + 18}:30, and ride tram line {day}. "
        f"Please confirm the plan for day {day} and tell us what to book first.",
    }


def user_index(messages: Messages, nth: int) -> int:
    """The index of the ``nth`` (1-based) user message."""
    return [i for i, m in enumerate(messages) if m["role"] == "user"][nth - 1]


def days(text: str) -> set[int]:
    """The day numbers a text names ("Day 7", "day 7")."""
    return {int(n) for n in re.findall(r"\b[Dd]ay (\d+)\b", text)}


@dataclass
class Sent:
    sent: Messages
    headers: Mapping[str, str]
    forwarded: Recorded
    answer: str

    @property
    def messages(self) -> Messages:
        return self.forwarded.json()["messages"]

    @property
    def branches(self) -> list[tuple[int, dict[str, Any]]]:
        """The forwarded branch summary messages and where they are."""
        return [(i, m) for i, m in enumerate(self.messages) if str(m.get("content", "")).startswith(BRANCH_HEADER)]

    @property
    def announced(self) -> int:
        return int(self.headers.get("X-Ctx-Branch-Summaries", "0"))

    def without_branches(self) -> Messages:
        at = {i for i, _ in self.branches}
        return [m for i, m in enumerate(self.messages) if i not in at]


class Client:
    """A stateless chat client (the ``openai`` SDK, base URL only): it resends the whole history."""

    def __init__(self, proxy: Proxy, upstream: Upstream, headers: Mapping[str, str] | None = None) -> None:
        self.proxy, self.upstream = proxy, upstream
        self.sdk = openai.AsyncOpenAI(
            base_url=proxy.base_url, api_key="sk-test", max_retries=0, default_headers=dict(headers or {})
        )

    async def send(self, messages: Messages, **extra: Any) -> Sent:
        raw = await self.sdk.chat.completions.with_raw_response.create(model=MODEL, messages=messages, **extra)
        answer = raw.parse().choices[0].message.content or ""
        # Let follow-up work (a background summary, the pending-request check) end, as it does
        # for a human-paced client.
        await self.proxy.server.app[TASKS].drain(5)
        return Sent(list(messages), CIMultiDict(raw.headers.items()), self.upstream.fake.chat_requests()[-1], answer)

    async def converse(self, history: Messages, asks: list[dict[str, Any]]) -> list[Sent]:
        """Send each question with the history so far, appending it and its answer."""
        played = []
        for question in asks:
            history.append(question)
            turn = await self.send(history)
            history.append({"role": "assistant", "content": turn.answer})
            played.append(turn)
        return played

    async def close(self) -> None:
        await self.sdk.close()


def lisbon(days_: range) -> list[dict[str, Any]]:
    return [ask(day) for day in days_]


def porto(days_: range) -> list[dict[str, Any]]:
    return [ask(day, "Porto") for day in days_]


def body_prefix(turn: Sent) -> bytes:
    """The forwarded body up to the end of its last message: what the next request of the same
    branch must start with for a provider's prompt cache to hit."""
    body = turn.forwarded.body
    return body[: body.rindex(b"]")]

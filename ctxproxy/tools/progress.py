"""What a proxy-tool loop does the same way whatever its wire protocol.

- ``Answering``: answering one round's calls through the executor, inside the window (``budget``):
  the round's assistant message is counted first, then the answers share the room left, each at
  most the tenant's ``result_max_tokens``, at most ``MAX_CALLS_PER_ROUND`` answered. The protocol
  says what an answer looks like on its wire (``AnswerMessage``), so it is counted as it is sent.
- ``Progress``: the next round's payload, the rounds answered, whether the next round must be the
  last (``closed``: the tenant's ``max_rounds`` reached, or no room left), the one withdrawal of
  every answer after a later round overflowed, and the call ids taken (``unique``: every call the
  loop answers gets an id no other call of the request has).
- ``log_done``: the one log line a loop writes when it ends.

Each protocol's dialect of the one loop (``driver``) builds its own conversation on these
(``ctxproxy.tools.rounds`` for chat completions, ``ctxproxy.wire.anthropic.tool_rounds`` for
Messages, ``ctxproxy.wire.openai_responses.tool_rounds`` for Responses).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import structlog

from ctxproxy.tools.budget import MAX_CALLS_PER_ROUND, MIN_ANSWER_TOKENS, NO_ROOM, TOO_MANY, Budget, Counting
from ctxproxy.tools.calls import ProxyCall, unique_ids

__all__ = [
    "EXECUTOR_FAILED",
    "LATER_OVERFLOW",
    "AnswerMessage",
    "Answering",
    "Progress",
    "ToolExecutor",
    "log_done",
]

log = structlog.get_logger(__name__)

ToolExecutor = Callable[[str, Mapping[str, Any] | None, str, int], Awaitable[str]]
"""(internal tool name, arguments when they are a JSON object else None, raw arguments, the most
tokens the answer may take) → the answer's text. Bad arguments are answered with an explanation,
not an exception."""

AnswerMessage = Callable[[str, str], Mapping[str, Any]]
"""(call id, answer text) → the message that carries one answer on the protocol's wire, as the
loop's ``Counting`` counts it."""

EXECUTOR_FAILED = "ctxproxy could not answer this call because of an internal error. Answer without it."
LATER_OVERFLOW = (
    "The conversation does not fit the model's context window once ctxproxy's tool answers are added: the "
    "upstream refused a later round of ctxproxy's tool loop, and again after ctxproxy withdrew its answers. "
    "Shorten the newest messages or use a model with a larger window."
)


@dataclass(frozen=True)
class Answering:
    """How one request's loop answers its calls."""

    execute: ToolExecutor
    counting: Counting
    result_max_tokens: int

    async def answer(
        self, turn: Mapping[str, Any], calls: Sequence[ProxyCall], budget: Budget, carrier: AnswerMessage
    ) -> tuple[list[str], Budget, bool]:
        """The answers to ``calls`` (made in the assistant message ``turn``), the budget once the
        round is added, and whether the next round must be the last (no room for more)."""
        count = self.counting.count_message
        budget = budget.spend(count(turn))
        answered = min(len(calls), MAX_CALLS_PER_ROUND)
        answers: list[str] = []
        starved = False
        for position, call in enumerate(calls):
            if position >= answered:
                text = TOO_MANY
            else:
                share = budget.share(count(carrier(call.id, "")), answered - position)
                limit = min(share, self.result_max_tokens)
                starved = starved or limit < MIN_ANSWER_TOKENS
                text = NO_ROOM if limit < MIN_ANSWER_TOKENS else self.counting.clip(await self._one(call, limit), limit)
            answers.append(text)
            budget = budget.spend(count(carrier(call.id, text)))
        return answers, budget, starved or budget.exhausted

    async def _one(self, call: ProxyCall, limit: int) -> str:
        try:
            return await self.execute(call.name, call.parsed_arguments(), call.arguments, limit)
        except Exception:
            log.exception("tools.executor_failed", tool=call.name)
            return EXECUTOR_FAILED


class Progress(ABC):
    """How far one request's loop has come, and the conversation it builds; a protocol says what
    forces a text answer (``last_choice``) and how answers are withdrawn (``without_answers``)."""

    last_choice: ClassVar[object]  # the ``tool_choice`` of a round that must answer in text
    conversation: ClassVar[str] = "messages"  # the payload's field the rounds are appended to

    def __init__(self, max_rounds: int, budget: Budget, payload: dict[str, Any], ids: frozenset[str]) -> None:
        """``payload``: round 1's; ``ids``: every tool call id its conversation holds."""
        self.payload = payload
        self.budget = budget
        self.rounds = 0
        self.closed = False  # the payload forbids further calls: whatever the model calls is not answered
        self._messages = list(payload.get(self.conversation) or [])
        self._start = len(self._messages)  # the loop's own messages begin here
        self._max_rounds = max_rounds
        self._ids = ids
        self._withdrawn = False

    def unique(self, calls: Sequence[ProxyCall]) -> list[ProxyCall]:
        """``calls`` with ids no other call of the request has (``unique_ids``), now taken."""
        out, self._ids = unique_ids(calls, self._ids)
        return out

    def advance(self, round_messages: Sequence[Any], budget: Budget, starved: bool) -> None:
        """A round was answered: ``round_messages`` (its calls, their answers) are appended and
        ``budget`` holds them. The next round is the last once ``max_rounds`` rounds were answered
        or ``starved`` (no room for more answers)."""
        self._messages += round_messages
        self.budget = budget
        self.rounds += 1
        self.closed = self.rounds >= self._max_rounds or starved
        self.payload = self._next(self._messages)

    def withdraw(self) -> bool:
        """After a later round overflowed: the payload becomes that round once more, with every answer
        replaced by ``NO_ROOM``, as the last. False when that was already tried."""
        if self._withdrawn or self.rounds == 0:
            return False
        self._withdrawn = self.closed = True
        self.payload = self._next(self.without_answers(self._messages, self._start))
        return True

    @abstractmethod
    def without_answers(self, messages: list[Any], start: int) -> list[Any]:
        """``messages`` with the text of every answer from message ``start`` on replaced by ``NO_ROOM``."""

    def _next(self, messages: list[Any]) -> dict[str, Any]:
        out = {**self.payload, self.conversation: messages}
        if self.closed:
            out["tool_choice"] = copy.deepcopy(self.last_choice)
        return out


def log_done(rounds: int, stream: bool, outcome: str) -> None:
    """The loop's one line when it ends; at debug when no proxy tool was called."""
    (log.info if rounds else log.debug)("tools.loop_done", tool_rounds=rounds, stream=stream, outcome=outcome)

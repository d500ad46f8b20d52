"""The conversations bench/compaction.py replays, as a stateless client sends them.

* **LoCoMo** (``_locomo``): ten long chats over chat completions, a request at every user message,
  no tools, no ``max_tokens``.
* **agent, chat** and **agent, Messages** (``_agent``): one long coding-agent session made of real
  tool output, over chat completions and over Anthropic's Messages, a request after every user
  message and after every batch of tool results, with the agent's tools and ``max_tokens``; on
  Messages the system prompt and the newest message carry an ephemeral breakpoint, as Claude Code
  sends them.

A request body is the join of pre-serialised messages (``Conversation.body``), so the client
costs little. ``client_meter`` is what the client's own requests would cost forwarded as sent,
and their floor (``_prompt_cost``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import _agent
import _locomo
import orjson
from _prompt_cost import CacheMeter, ChatShape, MessagesShape, Shape, Unit, Units

MODEL = "bench-model"  # no built-in window: each tenant's default_context_window applies
AGENT_MAX_TOKENS = 1024
_REQUEST_AFTER = frozenset({"user", "tool"})
_BREAKPOINT = {"cache_control": {"type": "ephemeral"}}


@dataclass(frozen=True)
class Conversation:
    id: str
    head: bytes  # the body up to its messages' opening bracket
    parts: list[bytes]  # each message, serialised
    last_parts: Mapping[int, bytes]  # a message as it is sent when it is the newest one, if different
    points: list[int]  # messages sent by each request, in order
    messages: list[dict[str, Any]]
    body_fields: Mapping[str, Any]  # the body without its messages
    headers: Mapping[str, str] = field(default_factory=dict)  # identity headers, if any

    def body(self, n: int) -> bytes:
        """The request that sends the first ``n`` messages."""
        last = self.last_parts.get(n - 1, self.parts[n - 1])
        return self.head + b",".join([*self.parts[: n - 1], last]) + b"]}"


@dataclass(frozen=True)
class Workload:
    key: str  # short, for tags
    title: str
    shape: Shape
    conversations: list[Conversation]
    reserve: int  # max_tokens each request keeps free for the answer

    @property
    def requests(self) -> int:
        return sum(len(c.points) for c in self.conversations)


def _conversation(
    cid: str,
    fields: dict[str, Any],
    messages: list[dict[str, Any]],
    points: list[int],
    newest: Any = None,
    headers: Mapping[str, str] | None = None,
) -> Conversation:
    """``newest``: how a message is sent when it is the newest one (None: as it is)."""
    head = orjson.dumps({**fields, "messages": []})[:-2]  # ...,"messages":[
    last = {n - 1: orjson.dumps(newest(messages[n - 1])) for n in points} if newest is not None else {}
    parts = [orjson.dumps(m) for m in messages]
    return Conversation(cid, head, parts, last, points, messages, fields, dict(headers or {}))


def _agent_points(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """After every user message or batch of tool results (the next message is the assistant's)."""
    return [
        n
        for n in range(1, len(messages) + 1)
        if messages[n - 1]["role"] in _REQUEST_AFTER and (n == len(messages) or messages[n]["role"] == "assistant")
    ]


def _with_breakpoint(message: dict[str, Any]) -> dict[str, Any]:
    blocks = list(message["content"])
    blocks[-1] = {**blocks[-1], **_BREAKPOINT}
    return {**message, "content": blocks}


def locomo(conversations: Sequence[_locomo.Conversation], units: Units, identified: bool) -> Workload:
    out = []
    for c in conversations:
        who = {"X-Ctx-User": c.speaker_a, "X-Ctx-Scope": f"locomo-{c.sample_id}"} if identified else {}
        points = [u + 1 for u in c.user_indices]
        out.append(_conversation(c.sample_id, {"model": MODEL}, c.messages, points, headers=who))
    n = len(conversations)
    return Workload("locomo", f"LoCoMo, {n} conversation{'s' * (n != 1)}", ChatShape(units), out, 0)


def agent(session: _agent.Session, units: Units) -> list[Workload]:
    chat = _agent.chat_messages(session)
    chat_fields = {"model": MODEL, "max_tokens": AGENT_MAX_TOKENS, "tools": _agent.chat_tools()}
    anthropic = _agent.messages_messages(session)
    messages_fields = {
        "model": MODEL,
        "max_tokens": AGENT_MAX_TOKENS,
        "system": _agent.messages_system(),
        "tools": _agent.messages_tools(),
    }
    return [
        Workload(
            "agent-chat",
            "agent session, chat completions",
            ChatShape(units),
            [_conversation("agent", chat_fields, chat, _agent_points(chat))],
            AGENT_MAX_TOKENS,
        ),
        Workload(
            "agent-messages",
            "agent session, Messages",
            MessagesShape(units),
            [_conversation("agent", messages_fields, anthropic, _agent_points(anthropic), _with_breakpoint)],
            AGENT_MAX_TOKENS,
        ),
    ]


@dataclass
class ClientSide:
    """The client's own requests, as if forwarded unchanged."""

    meter: CacheMeter
    final: list[int]  # each conversation's whole history (its last request), tokens
    units: list[list[Unit]]  # each conversation's whole history


def client_side(workload: Workload) -> ClientSide:
    out = ClientSide(CacheMeter(), [], [])
    for c in workload.conversations:
        units, head = workload.shape.units({**c.body_fields, "messages": c.messages})
        one = CacheMeter()
        tokens = 0
        for n in c.points:
            tokens, _ = one.add(units[: head + n])
        out.final.append(tokens)
        out.units.append(units)
        out.meter += one
    return out

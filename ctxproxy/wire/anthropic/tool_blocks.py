"""One round of the Messages tool loop in content blocks (pure): whose calls an answer makes, what the
client is shown, what the next round sends.

An answer's ``tool_use`` blocks are ours when their name is one of ours (``ProxyTools``), else the
client's; ``server_tool_use`` blocks are the upstream's own, never ours. Ours never reach the
client. A round that calls only ours is answered in the next request: the assistant message as the
model made it (thinking blocks and their signatures included, in their order; only empty text
blocks, which the API refuses in a request, and anything that is not a block are left out), then
one user message with a ``tool_result`` block per call, in the calls' order (``sent_back``,
``results_message``).

The client gets one message (``final_message``): what every earlier round showed (its blocks but our
``tool_use``), then the last answer's content without our ``tool_use`` blocks, the last answer's
``stop_reason`` — ``end_turn`` where it said ``tool_use`` and no call of the client's is left — and
the usage summed over every round (``ctxproxy.tools.calls.add_usage``: input, output and cache counts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ctxproxy.tools.calls import ProxyCall
from ctxproxy.tools.definitions import ProxyTools

__all__ = [
    "TOOL_USE",
    "final_message",
    "is_ours",
    "proxy_call",
    "result_message",
    "results_message",
    "sent_back",
    "shown",
    "split_uses",
    "stop_reason_shown",
    "tool_ids",
    "with_answers",
]

TOOL_USE = "tool_use"  # the stop reason, and the block type, of a turn that calls tools
END_TURN = "end_turn"

Block = dict[str, Any]


def is_ours(block: object, tools: ProxyTools) -> bool:
    return (
        isinstance(block, Mapping) and block.get("type") == TOOL_USE and tools.internal(block.get("name")) is not None
    )


def proxy_call(block: Mapping[str, Any], tools: ProxyTools, arguments: str | None = None) -> ProxyCall:
    """Our call made in ``block``; ``arguments``: its input's JSON text when it was streamed."""
    internal = tools.internal(block.get("name"))
    if internal is None:
        raise ValueError("not one of ctxproxy's tools")
    block_id = block.get("id")
    text = arguments if arguments is not None else orjson.dumps(block.get("input")).decode()
    return ProxyCall(block_id if isinstance(block_id, str) else "", internal, tools.wire(internal), text)


def split_uses(content: Sequence[Any], tools: ProxyTools) -> tuple[list[ProxyCall], bool]:
    """Our calls in ``content``, in order, and whether it calls one of the client's tools too."""
    ours = [proxy_call(block, tools) for block in content if is_ours(block, tools)]
    theirs = any(isinstance(b, Mapping) and b.get("type") == TOOL_USE and not is_ours(b, tools) for b in content)
    return ours, theirs


def shown(content: Sequence[Any], tools: ProxyTools) -> list[Any]:
    """``content`` as the client sees it: without our ``tool_use`` blocks."""
    return [block for block in content if not is_ours(block, tools)]


def stop_reason_shown(stop_reason: object, client_calls: bool) -> object:
    """The stop reason the client gets: a turn that stopped for our calls alone ended its turn."""
    return END_TURN if stop_reason == TOOL_USE and not client_calls else stop_reason


def sent_back(content: Sequence[Any], calls: Sequence[ProxyCall], tools: ProxyTools) -> dict[str, Any]:
    """The assistant message that made ``calls`` (ours, in order, with the ids ``unique_ids`` gave
    them) as the next round sends it: the model's content, our blocks with those ids, no empty text."""
    ids = iter(call.id for call in calls)
    out: list[Any] = []
    for block in content:
        if is_ours(block, tools):
            call_id = next(ids)
            out.append(block if block.get("id") == call_id else {**block, "id": call_id})
        elif isinstance(block, Mapping) and not (block.get("type") == "text" and block.get("text") == ""):
            out.append(block)
    return {"role": "assistant", "content": out}


def _result(call_id: str, answer: str) -> Block:
    return {"type": "tool_result", "tool_use_id": call_id, "content": answer}


def results_message(calls: Sequence[ProxyCall], answers: Sequence[str]) -> dict[str, Any]:
    """The user message that answers ``calls``: one ``tool_result`` per call, in order."""
    return {"role": "user", "content": [_result(c.id, a) for c, a in zip(calls, answers, strict=True)]}


def result_message(call_id: str, answer: str) -> dict[str, Any]:
    """One answer as a message of its own: how the loop counts it (``AnswerMessage``)."""
    return {"role": "user", "content": [_result(call_id, answer)]}


def with_answers(messages: Sequence[Any], start: int, answer: str) -> list[Any]:
    """``messages`` with the content of every ``tool_result`` from message ``start`` on replaced by
    ``answer``: the same conversation, every call still answered."""
    out = list(messages[:start])
    for message in messages[start:]:
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            out.append(message)
            continue
        blocks = [{**b, "content": answer} if _is_result(b) else b for b in content]
        out.append({**message, "content": blocks})
    return out


def _is_result(block: object) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "tool_result"


def tool_ids(messages: Sequence[Any]) -> frozenset[str]:
    """Every tool call id ``messages`` hold: ``tool_use`` ids and the ids ``tool_result`` blocks answer."""
    ids: set[str] = set()
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, Mapping):
                continue
            found = block.get("id") if block.get("type") == TOOL_USE else block.get("tool_use_id")
            if isinstance(found, str):
                ids.add(found)
    return frozenset(ids)


def final_message(
    answer: Mapping[str, Any], tools: ProxyTools, usage: Mapping[str, Any] | None, earlier: Sequence[Any] = ()
) -> dict[str, Any]:
    """The message the client gets (see the module); ``earlier``: what earlier rounds showed."""
    content = answer.get("content")
    blocks = content if isinstance(content, list) else []
    _, client_calls = split_uses(blocks, tools)
    out = {**answer, "content": [*earlier, *shown(blocks, tools)]}
    if "stop_reason" in answer:
        out["stop_reason"] = stop_reason_shown(answer["stop_reason"], client_calls)
    if usage is not None:
        out["usage"] = dict(usage)
    return out

"""Agent facts reachable with one recall call (issue 27.4), through the proxy itself.

After the last request of an agent conversation, each fact of its compacted part that the
forwarded prompt no longer holds (``_agent_facts``) is asked for once: the client's last request
is sent again, and the upstream (this benchmark's, scripted per request) answers it with calls
of ctxproxy's tools, five per request — what ctxproxy answers in one round: for a fact of a tool
output ctxproxy masked in the prompt, ``ctxproxy_retrieve`` with the placeholder's ref and the
fact as the query; for any other, ``ctxproxy_search_memory`` with the fact as the query
(``top_k`` 3). ctxproxy answers them itself and asks the
upstream again with its answers, which the upstream reads: a fact is *reached* when its call's
answer holds it word for word. A fact that is still in the prompt counts as reached without a
call; where the request is not offered the tool (memory off: no search), the fact is not reached.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import aiohttp
import orjson
from _bench_client import post
from _compaction_servers import Upstream
from _prompt_cost import Shape

SEARCH = "ctxproxy_search_memory"
RETRIEVE = "ctxproxy_retrieve"
CALLS_PER_REQUEST = 5  # ctxproxy answers at most five of its calls per round (tools.budget)
TOP_K = 3


def call_for(fact: str, refs: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """The one call that asks for ``fact``: the retrieval of the masked output that held it, with
    the fact as the query, or a memory search for it."""
    ref = refs.get(fact)
    return (RETRIEVE, {"ref": ref, "query": fact}) if ref else (SEARCH, {"query": fact, "top_k": TOP_K})


def _search_calls(route: str, asked: Sequence[tuple[str, dict[str, Any]]]) -> bytes:
    """The upstream's answer: the calls ``asked``, in ``route``'s protocol."""
    if route == "chat":
        calls = [
            {
                "id": f"recall_{i}",
                "type": "function",
                "function": {"name": name, "arguments": orjson.dumps(a).decode()},
            }
            for i, (name, a) in enumerate(asked)
        ]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        return orjson.dumps(
            {
                "id": "chatcmpl-recall",
                "object": "chat.completion",
                "created": 0,
                "model": "bench-model",
                "choices": [choice],
                "usage": {"prompt_tokens": 0, "completion_tokens": 1, "total_tokens": 1},
            }
        )
    blocks = [{"type": "tool_use", "id": f"toolu_recall_{i}", "name": n, "input": a} for i, (n, a) in enumerate(asked)]
    return orjson.dumps(
        {
            "id": "msg_recall",
            "type": "message",
            "role": "assistant",
            "model": "bench-model",
            "content": blocks,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 1},
        }
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(part.get("text", part.get("content"))) for part in content if isinstance(part, Mapping))
    return ""


def _calls_search(message: Mapping[str, Any]) -> bool:
    """An assistant message that calls the search tool (chat ``tool_calls``, Messages ``tool_use``)."""
    calls = [c.get("function") or {} for c in message.get("tool_calls") or [] if isinstance(c, Mapping)]
    content = message.get("content")
    calls += (
        [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"]
        if isinstance(content, list)
        else []
    )
    return any(isinstance(c, Mapping) and c.get("name") in (SEARCH, RETRIEVE) for c in calls)


def _answers(body: Mapping[str, Any]) -> list[str] | None:
    """ctxproxy's answers to our calls, in order, when ``body`` is the round that carries them."""
    messages = body.get("messages") or []
    if not any(_calls_search(m) for m in messages if m.get("role") == "assistant"):
        return None
    last = messages[-1]
    if last.get("role") == "user":  # Messages: tool_result blocks
        blocks = last.get("content") if isinstance(last.get("content"), list) else []
        return [_text(b.get("content")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_result"]
    answers = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        answers.append(_text(message.get("content")))
    return answers[::-1]


class Script:
    """What the upstream answers one recall request with, and what it learnt from round two."""

    def __init__(self, asked: Sequence[tuple[str, dict[str, Any]]]) -> None:
        self.asked = list(asked)
        self.offered = False
        self.answers: list[str] = []

    def __call__(self, route: str, raw: bytes) -> bytes | None:
        body = orjson.loads(raw)
        answers = _answers(body)
        if answers is not None:
            self.answers = answers
            return None  # the upstream's usual text answer ends the loop
        tools = orjson.dumps(body.get("tools") or []).decode()
        self.offered = all(f'"{name}"' in tools for name, _ in self.asked)
        return _search_calls(route, self.asked) if self.offered else None


def _batches(items: Sequence[str]) -> Iterator[list[str]]:
    for i in range(0, len(items), CALLS_PER_REQUEST):
        yield list(items[i : i + CALLS_PER_REQUEST])


async def reached(
    http: aiohttp.ClientSession,
    base: str,
    shape: Shape,
    client: bytes,
    headers: Mapping[str, str] | None,
    upstream: Upstream,
    tag: str,
    missing: Sequence[str],
    refs: Mapping[str, str],
) -> set[str]:
    """Of the ``missing`` facts, those one call through ctxproxy's answers holds (``refs``: the
    masked output's ref, for a fact of one)."""
    found: set[str] = set()
    for n, batch in enumerate(_batches(missing)):
        script = Script([call_for(fact, refs) for fact in batch])
        key = f"{tag}:recall:{n}"
        upstream.scripts[key] = script
        try:
            await post(http, base, shape, client, key, headers)
        finally:
            del upstream.scripts[key]
            upstream.bodies.pop(key, None)
        found |= {q for q, answer in zip(batch, script.answers, strict=False) if q in answer}
    return found

"""Pure helpers for one tool round: tell our calls from the client's, strip ours, build the next round.

A model's answer may call our tools (``ProxyTools``), the client's, or both. Ours never reach the
client; theirs reach it exactly as the model wrote them, renumbered when ours sat between them.
The next round's request repeats the assistant message with our calls and adds one ``tool``
message per call, which is the conversation shape every OpenAI-compatible upstream expects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.tools.definitions import ProxyTools

# An answer that ends like this was cut or withheld: answering its tool calls would not help.
_STOPPED = frozenset({"length", "content_filter"})


@dataclass(frozen=True)
class ProxyCall:
    """One complete call of a proxy tool, as the model made it."""

    id: str
    name: str  # internal name (``RECALL_PAGE`` …)
    wire_name: str
    arguments: str  # raw JSON text, possibly invalid

    def parsed_arguments(self) -> Mapping[str, Any] | None:
        """The arguments when they are a JSON object, else None (the executor explains the mistake)."""
        try:
            parsed = orjson.loads(self.arguments or "{}")
        except orjson.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) else None


def fallback_call_id(position: int) -> str:
    """An id for a call the upstream sent without one: the tool message must name its call."""
    return f"ctxproxy_call_{position}"


def _function(call: object) -> Mapping[str, Any]:
    if isinstance(call, Mapping):
        function = call.get("function")
        if isinstance(function, Mapping):
            return function
    return {}


def split_calls(message: Mapping[str, Any], tools: ProxyTools) -> tuple[list[ProxyCall], list[Any]]:
    """(our calls, the client's calls) of a non-streamed assistant message, each in the model's order."""
    raw = message.get("tool_calls")
    proxy: list[ProxyCall] = []
    client: list[Any] = []
    for position, call in enumerate(raw if isinstance(raw, list) else []):
        function = _function(call)
        internal = tools.internal(function.get("name"))
        if internal is None:
            client.append(call)
            continue
        call_id = call.get("id") if isinstance(call, Mapping) else None
        arguments = function.get("arguments")
        proxy.append(
            ProxyCall(
                id=call_id if isinstance(call_id, str) and call_id else fallback_call_id(position),
                name=internal,
                wire_name=str(function.get("name")),
                arguments=arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode(),
            )
        )
    return proxy, client


def strip_proxy_calls(choice: Mapping[str, Any], tools: ProxyTools) -> dict[str, Any]:
    """A choice without our tool calls; the client's are kept and renumbered.

    With no client call left, ``tool_calls`` goes away entirely and a ``"tool_calls"`` finish becomes
    ``"stop"``: an answer that says it ends in tool calls but carries none breaks agent loops that
    iterate ``message.tool_calls``.
    """
    message = choice.get("message")
    if not isinstance(message, Mapping) or "tool_calls" not in message:
        return dict(choice)
    proxy, client = split_calls(message, tools)
    if not proxy:
        return dict(choice)
    stripped = {key: value for key, value in message.items() if key != "tool_calls"}
    out = {**choice, "message": stripped}
    if client:
        stripped["tool_calls"] = [_renumbered(call, i) for i, call in enumerate(client)]
    elif out.get("finish_reason") == "tool_calls":
        out["finish_reason"] = "stop"
    return out


def _renumbered(call: Any, index: int) -> Any:
    """Some upstreams put ``index`` in non-streamed calls too; it must count the client's calls only."""
    if isinstance(call, Mapping) and "index" in call:
        return {**call, "index": index}
    return call


def wants_answers(proxy: Sequence[ProxyCall], client_calls: bool, finish_reason: object) -> bool:
    """Whether ctxproxy should answer this round's calls and ask the upstream again.

    Only when every call is ours: with a client call among them the turn goes to the client (its
    next request, holding its own calls and results, is a valid conversation without ours).
    """
    return bool(proxy) and not client_calls and finish_reason not in _STOPPED


def assistant_turn(content: object, calls: Sequence[ProxyCall], reasoning: object = None) -> dict[str, Any]:
    """The assistant message that made ``calls``, as the next round sends it back.

    Rebuilt from what matters rather than copied, so response-only fields (``refusal``,
    ``annotations``, ``audio``) are not sent as request fields. ``reasoning_content`` is kept:
    reasoning models that use it (DeepSeek) require it back within the same tool loop.
    """
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content or None,
        "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.wire_name, "arguments": call.arguments}}
            for call in calls
        ],
    }
    if reasoning:
        message["reasoning_content"] = reasoning
    return message


def round_messages(assistant: Mapping[str, Any], calls: Sequence[ProxyCall], answers: Sequence[str]) -> list[Any]:
    """The messages a tool round appends: the assistant's calls, then one answer per call, in order."""
    pairs = zip(calls, answers, strict=True)
    results = [{"role": "tool", "tool_call_id": call.id, "content": answer} for call, answer in pairs]
    return [dict(assistant), *results]


def add_usage(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Two usage objects summed field by field, nested ones (``prompt_tokens_details``) included.

    Numbers add; a field only one side has is kept; anything else (a string, a null) keeps the
    first non-null value. None means "no usage reported".
    """
    if a is None:
        return dict(b) if b is not None else None
    if b is None:
        return dict(a)
    total: dict[str, Any] = dict(a)
    for key, value in b.items():
        mine = total.get(key)
        if _is_number(mine) and _is_number(value):
            total[key] = mine + value
        elif isinstance(mine, Mapping) and isinstance(value, Mapping):
            total[key] = add_usage(mine, value)
        elif mine is None:
            total[key] = value
    return total


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def final_answer(answer: Mapping[str, Any], tools: ProxyTools, usage: Mapping[str, Any] | None) -> dict[str, Any]:
    """A completion as the client gets it: our calls stripped from every choice, usage summed."""
    choices = answer.get("choices")
    out = dict(answer)
    if isinstance(choices, list):
        out["choices"] = [strip_proxy_calls(c, tools) if isinstance(c, Mapping) else c for c in choices]
    if usage is not None:
        out["usage"] = dict(usage)
    return out


def first_choice(answer: Mapping[str, Any]) -> Mapping[str, Any]:
    choices = answer.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        return choices[0]
    return {}

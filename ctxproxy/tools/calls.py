"""Pure helpers for one tool round: tell our calls from the client's, strip ours, build the next round.

A model's answer may call our tools (``ProxyTools``), the client's, or both. Ours never reach the
client; theirs reach it exactly as the model wrote them, renumbered when ours sat between them.
The next round's request repeats the assistant message with our calls and adds one ``tool``
message per call, which is the conversation shape every OpenAI-compatible upstream expects.

What the client reads is every round's text, in order, with a blank line (``ROUND_SEPARATOR``)
before a round's text when the text before it does not already end in whitespace
(``joined_text``): the stream shows each round's text as it comes, and the JSON answer carries
the same text (``final_answer``'s ``earlier``). Reasoning (``reasoning_content``) is joined the
same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.vocabulary import ROLE_ASSISTANT, ROLE_TOOL

# An answer that ends like this was cut or withheld: answering its tool calls would not help.
_STOPPED = frozenset({"length", "content_filter"})
ROUND_SEPARATOR = "\n\n"  # between the texts of two rounds, as the client reads them


@dataclass(frozen=True)
class ProxyCall:
    """One complete call of a proxy tool, as the model made it."""

    id: str  # the upstream's; "" when it gave none (``unique_ids`` gives every call one)
    name: str  # internal name (``RECALL_PAGE`` …)
    wire_name: str
    arguments: str  # raw JSON text, possibly invalid

    def parsed_arguments(self) -> Mapping[str, Any] | None:
        """The arguments when they are a JSON object, else None (the executor explains the mistake)."""
        text = self.arguments or "{}"
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            try:  # orjson refuses numbers beyond a double's range, which are valid JSON
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                return None
        return parsed if isinstance(parsed, dict) else None


FALLBACK_ID = "ctxproxy_call_{}"  # an id ctxproxy gives a call (numbered per request)


def function_of(call: object) -> Mapping[str, Any]:
    """A tool call's (or streamed fragment's) ``function`` object; empty when it has none."""
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
    for call in raw if isinstance(raw, list) else []:
        function = function_of(call)
        internal = tools.internal(function.get("name"))
        if internal is None:
            client.append(call)
            continue
        call_id = call.get("id") if isinstance(call, Mapping) else None
        arguments = function.get("arguments")
        proxy.append(
            ProxyCall(
                id=call_id if isinstance(call_id, str) else "",
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


def call_ids(messages: Sequence[Any]) -> frozenset[str]:
    """Every tool call id ``messages`` hold: the assistant messages' calls and the tool messages' answers."""
    ids: set[str] = set()
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        answered = message.get("tool_call_id")
        if isinstance(answered, str):
            ids.add(answered)
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            call_id = call.get("id") if isinstance(call, Mapping) else None
            if isinstance(call_id, str):
                ids.add(call_id)
    return frozenset(ids)


def unique_ids(calls: Sequence[ProxyCall], taken: frozenset[str]) -> tuple[list[ProxyCall], frozenset[str]]:
    """``calls`` with ids no other call of the request has, and the ids taken once they are added.

    A call keeps the upstream's id unless it has none or the id is ``taken`` (by the client's
    messages, an earlier round, or another call of this round); then it gets the first free
    ``ctxproxy_call_<n>``. The tool message answering a call names the id given here."""
    out: list[ProxyCall] = []
    used = set(taken)
    number = 0
    for call in calls:
        call_id = call.id
        if not call_id or call_id in used:
            while FALLBACK_ID.format(number) in used:
                number += 1
            call_id = FALLBACK_ID.format(number)
        used.add(call_id)
        out.append(call if call_id == call.id else replace(call, id=call_id))
    return out, frozenset(used)


def wants_answers(proxy: Sequence[ProxyCall], client_calls: bool, finish_reason: object) -> bool:
    """Whether ctxproxy should answer this round's calls and ask the upstream again.

    Only when every call is ours: with a client call among them the turn goes to the client (its
    next request, holding its own calls and results, is a valid conversation without ours).
    """
    return bool(proxy) and not client_calls and finish_reason not in _STOPPED


def finish_allows_answers(finish_reason: object) -> bool:
    """An answer that finished this way may have its calls answered (it was not cut or withheld)."""
    return finish_reason not in _STOPPED


def assistant_turn(content: object, calls: Sequence[ProxyCall], reasoning: object = None) -> dict[str, Any]:
    """The assistant message that made ``calls``, as the next round sends it back.

    Rebuilt from what matters rather than copied, so response-only fields (``refusal``,
    ``annotations``, ``audio``) are not sent as request fields. ``reasoning_content`` is kept:
    reasoning models that use it (DeepSeek) require it back within the same tool loop.
    """
    message: dict[str, Any] = {
        "role": ROLE_ASSISTANT,
        "content": content or None,
        "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.wire_name, "arguments": call.arguments}}
            for call in calls
        ],
    }
    if reasoning:
        message["reasoning_content"] = reasoning
    return message


def tool_message(call_id: str, answer: str) -> dict[str, Any]:
    return {"role": ROLE_TOOL, "tool_call_id": call_id, "content": answer}


def round_messages(assistant: Mapping[str, Any], calls: Sequence[ProxyCall], answers: Sequence[str]) -> list[Any]:
    """The messages a tool round appends: the assistant's calls, then one answer per call, in order."""
    pairs = zip(calls, answers, strict=True)
    return [dict(assistant), *(tool_message(call.id, answer) for call, answer in pairs)]


def replace_answers(messages: Sequence[Any], start: int, answer: str) -> list[Any]:
    """``messages`` with the content of every ``tool`` message from ``start`` on replaced by ``answer``.

    The loop's own rounds begin at ``start``: the conversation keeps its shape (every call still
    has its answer), only the answers' text changes."""
    out = list(messages[:start])
    for message in messages[start:]:
        is_tool = isinstance(message, Mapping) and message.get("role") == ROLE_TOOL
        out.append({**message, "content": answer} if is_tool else message)
    return out


def separator_after(text: str) -> str:
    """What goes between ``text`` and the next round's: nothing when it is empty or already ends in
    whitespace, else ``ROUND_SEPARATOR``, so two rounds' words are never glued together."""
    return ROUND_SEPARATOR if text and not text[-1].isspace() else ""


def joined_text(texts: Sequence[str]) -> str:
    """The rounds' texts as the client reads them, each preceded by ``separator_after`` the ones before."""
    out = ""
    for text in texts:
        if text:
            out += separator_after(out) + text
    return out


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


def final_answer(
    answer: Mapping[str, Any],
    tools: ProxyTools,
    usage: Mapping[str, Any] | None,
    earlier: str = "",
    earlier_reasoning: str = "",
) -> dict[str, Any]:
    """A completion as the client gets it: our calls stripped from every choice, usage summed.

    ``earlier``: what the tool rounds before this answer said (``joined_text``); it goes in front
    of the first choice's text, so the JSON answer reads as the stream did. ``earlier_reasoning``
    likewise goes in front of its ``reasoning_content``."""
    choices = answer.get("choices")
    out = dict(answer)
    if isinstance(choices, list):
        out["choices"] = [strip_proxy_calls(c, tools) if isinstance(c, Mapping) else c for c in choices]
        if out["choices"] and isinstance(out["choices"][0], Mapping):
            first = _with_earlier(out["choices"][0], "content", earlier)
            out["choices"][0] = _with_earlier(first, "reasoning_content", earlier_reasoning)
    if usage is not None:
        out["usage"] = dict(usage)
    return out


def _with_earlier(choice: Mapping[str, Any], field: str, earlier: str) -> Mapping[str, Any]:
    """``choice`` with ``earlier`` joined in front of its message's text ``field``."""
    message = choice.get("message")
    if not earlier or not isinstance(message, Mapping):
        return choice
    text = message.get(field)
    if text is not None and not isinstance(text, str):
        return choice  # content parts: leave the model's structure alone
    return {**choice, "message": {**message, field: joined_text([earlier, text or ""])}}


def first_choice(answer: Mapping[str, Any]) -> Mapping[str, Any]:
    choices = answer.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        return choices[0]
    return {}


def json_object(raw: bytes) -> dict[str, Any] | None:
    """An upstream answer's body when it is a JSON object, else None."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def as_mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None

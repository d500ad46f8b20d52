"""One round of the Responses tool loop in output items (pure): whose calls an answer makes, what the
client is shown, what the next round sends.

A ``function_call`` item is ours when its name is one of ours (``ProxyTools``); every other call
(a client function, a custom tool, a shell or computer call: any item with a ``call_id`` that is
not an output) is the client's. Ours never reach the client, and neither does a ``reasoning``
item that led to ours alone: the API refuses a reasoning item without the item it produced
(``shown``; one that also led to an item the client sees stays). A round that calls only ours is
answered in the next request: its output items as the model made them (our calls with the ids
``unique_ids`` gave them), then one ``function_call_output`` per call, in order (``sent_back``,
``outputs``).

The client gets one response (``final_response``): what every earlier round showed, then the last
answer's output without our calls, and the usage summed over every round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ctxproxy.tools.calls import ProxyCall
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.wire.openai_responses.items import FUNCTION_CALL, FUNCTION_OUTPUT, kind_of

__all__ = [
    "final_response",
    "is_ours",
    "led_to_ours_alone",
    "output_item",
    "outputs",
    "proxy_call",
    "sent_back",
    "shown",
    "split_calls",
    "tool_ids",
    "with_answers",
]

REASONING: Final = "reasoning"

Item = dict[str, Any]


def is_ours(item: object, tools: ProxyTools) -> bool:
    return (
        isinstance(item, Mapping) and item.get("type") == FUNCTION_CALL and tools.internal(item.get("name")) is not None
    )


def proxy_call(item: Mapping[str, Any], tools: ProxyTools) -> ProxyCall:
    internal = tools.internal(item.get("name"))
    if internal is None:
        raise ValueError("not one of ctxproxy's tools")
    call_id, arguments = item.get("call_id"), item.get("arguments")
    return ProxyCall(
        call_id if isinstance(call_id, str) else "",
        internal,
        tools.wire(internal),
        arguments if isinstance(arguments, str) else "{}",
    )


def split_calls(output: Sequence[Any], tools: ProxyTools) -> tuple[list[ProxyCall], bool]:
    """Our calls in ``output``, in order, and whether it calls one of the client's tools too."""
    ours = [proxy_call(item, tools) for item in output if is_ours(item, tools)]
    theirs = any(isinstance(i, Mapping) and kind_of(i) == "call" and not is_ours(i, tools) for i in output)
    return ours, theirs


def shown(output: Sequence[Any], tools: ProxyTools) -> list[Any]:
    """``output`` as the client sees it: without our calls, and without a reasoning item that led to
    ours alone (the items after it, up to the next reasoning item, all ours)."""
    out: list[Any] = []
    for i, item in enumerate(output):
        if is_ours(item, tools):
            continue
        if _reasoning(item) and led_to_ours_alone(output[i + 1 :], tools):
            continue
        out.append(item)
    return out


def led_to_ours_alone(following: Sequence[Any], tools: ProxyTools) -> bool:
    """Whether the items a reasoning item produced (``following`` up to the next reasoning item)
    are ours, every one of them, and there is one."""
    produced: list[Any] = []
    for item in following:
        if _reasoning(item):
            break
        produced.append(item)
    return bool(produced) and all(is_ours(item, tools) for item in produced)


def _reasoning(item: object) -> bool:
    return isinstance(item, Mapping) and item.get("type") == REASONING


def sent_back(output: Sequence[Any], calls: Sequence[ProxyCall], tools: ProxyTools) -> list[Item]:
    """The round's output items as the next round sends them: our calls with the ids given them."""
    ids = iter(call.id for call in calls)
    out: list[Item] = []
    for item in output:
        if not isinstance(item, Mapping):
            continue
        if is_ours(item, tools):
            call_id = next(ids)
            out.append(dict(item) if item.get("call_id") == call_id else {**item, "call_id": call_id})
        else:
            out.append(dict(item))
    return out


def output_item(call_id: str, answer: str) -> Item:
    return {"type": FUNCTION_OUTPUT, "call_id": call_id, "output": answer}


def outputs(calls: Sequence[ProxyCall], answers: Sequence[str]) -> list[Item]:
    """One ``function_call_output`` per call, in order."""
    return [output_item(call.id, answer) for call, answer in zip(calls, answers, strict=True)]


def with_answers(items: Sequence[Any], start: int, answer: str) -> list[Any]:
    """``items`` with every ``function_call_output`` from item ``start`` on saying ``answer``."""
    head = list(items[:start])
    rest = [
        {**item, "output": answer} if isinstance(item, Mapping) and item.get("type") == FUNCTION_OUTPUT else item
        for item in items[start:]
    ]
    return head + rest


def tool_ids(items: Sequence[Any]) -> frozenset[str]:
    """Every ``call_id`` the items hold (calls and outputs)."""
    found = (item.get("call_id") for item in items if isinstance(item, Mapping))
    return frozenset(call_id for call_id in found if isinstance(call_id, str))


def final_response(
    answer: Mapping[str, Any], tools: ProxyTools, usage: Mapping[str, Any] | None, earlier: Sequence[Any] = ()
) -> dict[str, Any]:
    """The response the client gets (see the module); ``earlier``: what earlier rounds showed."""
    output = answer.get("output")
    out = {**answer, "output": [*earlier, *shown(output if isinstance(output, list) else [], tools)]}
    if usage is not None:
        out["usage"] = dict(usage)
    return out

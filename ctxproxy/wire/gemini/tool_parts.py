"""One round of the Gemini tool loop in parts (pure): whose calls an answer makes, what the client
is shown, what the next round sends.

A ``functionCall`` part is ours when its name is one of ours (``ProxyTools``), else the client's.
Ours never reach the client. A round that calls only ours is answered in the next request: the
``model`` content as the model made it (thoughts and every ``thoughtSignature`` with its part),
then one ``user`` content with a ``functionResponse`` per call, in the calls' order, each
``{"name", "response": {"output": answer}}`` and the call's ``id`` when it had one (Gemini pairs a
response with its call by position, or by that id).

The client gets one answer (``final_answer``): the first candidate's parts as every earlier round
showed them (without our calls), then the last answer's parts without ours, and the usage summed
over every round (``usageMetadata``, field by field).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from ctxproxy.tools.calls import ProxyCall
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.wire.gemini.canonical import MODEL, USER
from ctxproxy.wire.gemini.fields import field, spelled

__all__ = [
    "answer_parts",
    "final_answer",
    "first_parts",
    "is_ours",
    "model_content",
    "response_part",
    "results_content",
    "shown",
    "split_calls",
    "tool_ids",
    "with_answers",
    "with_parts",
]

OUTPUT: Final = "output"

Part = Mapping[str, Any]


def _call(part: object) -> Mapping[str, Any] | None:
    call = field(part, "functionCall") if isinstance(part, Mapping) else None
    return call if isinstance(call, Mapping) else None


def is_ours(part: object, tools: ProxyTools) -> bool:
    call = _call(part)
    return call is not None and tools.internal(call.get("name")) is not None


def split_calls(parts: Sequence[Any], tools: ProxyTools) -> tuple[list[ProxyCall], bool]:
    """Our calls in ``parts``, in order, and whether they call one of the client's functions too."""
    ours: list[ProxyCall] = []
    theirs = False
    for part in parts:
        call = _call(part)
        internal = tools.internal(call.get("name")) if call is not None else None
        if call is None:
            continue
        if internal is None:
            theirs = True
            continue
        own = call.get("id")
        arguments = orjson.dumps(call.get("args") or {}).decode()
        ours.append(ProxyCall(own if isinstance(own, str) else "", internal, tools.wire(internal), arguments))
    return ours, theirs


def shown(parts: Sequence[Any], tools: ProxyTools) -> list[Any]:
    """``parts`` as the client sees them: without our calls."""
    return [part for part in parts if not is_ours(part, tools)]


def response_part(name: str, answer: str, call_id: object = None) -> dict[str, Any]:
    response: dict[str, Any] = {"name": name, "response": {OUTPUT: answer}}
    if isinstance(call_id, str) and call_id:
        response["id"] = call_id
    return {"functionResponse": response}


def results_content(parts: Sequence[Any], answers: Sequence[str], tools: ProxyTools) -> dict[str, Any]:
    """The ``user`` content answering the calls of ours among ``parts``, one response each, in order."""
    calls = [call for part in parts if is_ours(part, tools) and (call := _call(part)) is not None]
    responses = [response_part(str(c.get("name")), a, c.get("id")) for c, a in zip(calls, answers, strict=True)]
    return {"role": USER, "parts": responses}


def answer_parts(parts: Sequence[Any]) -> list[Any]:
    """A round's parts as the next round sends them back: empty text parts with nothing else left out."""
    return [p for p in parts if isinstance(p, Mapping) and not (set(p) == {"text"} and p["text"] == "")]


def model_content(parts: Sequence[Any]) -> dict[str, Any]:
    return {"role": MODEL, "parts": answer_parts(parts)}


def with_answers(contents: Sequence[Any], start: int, answer: str) -> list[Any]:
    """``contents`` with every response's output from content ``start`` on replaced by ``answer``."""
    out = list(contents[:start])
    for content in contents[start:]:
        parts = field(content, "parts") if isinstance(content, Mapping) else None
        if not isinstance(parts, list):
            out.append(content)
            continue
        out.append({**content, "parts": [_answered(p, answer) for p in parts]})
    return out


def _answered(part: Any, answer: str) -> Any:
    response = field(part, "functionResponse") if isinstance(part, Mapping) else None
    if not isinstance(response, Mapping):
        return part
    return response_part(str(response.get("name")), answer, response.get("id"))


def tool_ids(contents: Sequence[Any]) -> frozenset[str]:
    """Every call id ``contents`` hold (Gemini's calls mostly have none)."""
    ids: set[str] = set()
    for content in contents:
        parts = field(content, "parts") if isinstance(content, Mapping) else None
        for part in parts if isinstance(parts, list) else ():
            for name in ("functionCall", "functionResponse"):
                found = field(part, name) if isinstance(part, Mapping) else None
                if isinstance(found, Mapping) and isinstance(found.get("id"), str):
                    ids.add(found["id"])
    return frozenset(ids)


def first_parts(answer: Mapping[str, Any]) -> list[Any] | None:
    """The first candidate's parts; None when the answer has no candidate with content."""
    candidates = answer.get("candidates")
    if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], Mapping):
        return None
    content = candidates[0].get("content")
    parts = content.get("parts") if isinstance(content, Mapping) else None
    return list(parts) if isinstance(parts, list) else []


def with_parts(
    answer: Mapping[str, Any], parts: Sequence[Any], usage: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``answer`` with its first candidate's parts replaced (and its usage, when given)."""
    candidates = list(answer.get("candidates") or [{}])
    first = candidates[0] if isinstance(candidates[0], Mapping) else {}
    given = first.get("content")
    content: Mapping[str, Any] = given if isinstance(given, Mapping) else {"role": MODEL}
    out = {**answer, "candidates": [{**first, "content": {**content, "parts": list(parts)}}, *candidates[1:]]}
    if usage is not None:
        out[spelled(answer, "usageMetadata") or "usageMetadata"] = dict(usage)
    return out


def final_answer(
    answer: Mapping[str, Any], tools: ProxyTools, usage: Mapping[str, Any] | None, earlier: Sequence[Any] = ()
) -> dict[str, Any]:
    """The answer the client gets (see the module); ``earlier``: what earlier rounds showed."""
    return with_parts(answer, [*earlier, *shown(first_parts(answer) or [], tools)], usage)

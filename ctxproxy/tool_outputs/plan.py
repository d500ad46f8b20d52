"""Which tool results of one request are compressed and which masked, and into what. Pure.

The client's messages (ctxproxy's canonical form: ``tool`` messages answering an assistant's
``tool_calls`` by id) are read once:

* **fresh** results — those after the last assistant message, which the client sends for the first
  time — of at least ``min_tokens`` are compressed (``compress``) when their kind allows;
* a result compressed in an earlier request of the session (``before``: its key → the text it was
  sent as) is sent as that same text again, byte for byte; any other older result is left as it
  was sent — never compressed after it went upstream whole;
* the results of all but the newest ``keep_turns`` agent turns are masked, in batches
  (``mask.masked_turns``), when the placeholder is much smaller than what it replaces.

Never touched: a tool named in ``keep_tools``; a result the client marked for caching
(``cache_control`` on it or its parts); a result with a part that is not text (an image). A
result's key joins its call id and its content's ref, so the same output answering another
call is another result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ctxproxy.tool_outputs.compress import compress, ref_of
from ctxproxy.tool_outputs.mask import masked_turns, placeholder
from ctxproxy.vocabulary import ROLE_ASSISTANT, ROLE_TOOL

MASK_GAIN: Final = 2  # a result is masked only when at least this many times longer than its placeholder
CACHE_MARK: Final = "cache_control"


@dataclass(frozen=True)
class Options:
    min_tokens: int
    keep_turns: int
    keep_tools: frozenset[str]
    retrieve: str  # the name the model calls the retrieval tool by


@dataclass(frozen=True)
class Result:
    """One tool result of the client's messages."""

    index: int  # in the client's messages
    key: str  # ``{ref}:{call id}``
    ref: str
    text: str
    tool: str | None
    arguments: object
    turn: int | None  # the agent turn that called it (0 the oldest), None when its call is not found


@dataclass(frozen=True)
class ToolOutputPlan:
    contents: Mapping[int, str]  # client message index → the content it is forwarded with
    compressed: frozenset[int]  # of those, the indices compressed (the others are masked)
    fresh: Mapping[str, str]  # results compressed for the first time: key → compressed text
    originals: Mapping[str, str] = field(default_factory=dict)  # ref → original, of every result changed
    fresh_at: frozenset[int] = frozenset()  # the indices of the results compressed for the first time

    @property
    def masked(self) -> frozenset[int]:
        return frozenset(self.contents) - self.compressed


def plan(
    messages: Sequence[Mapping[str, Any]],
    options: Options,
    before: Mapping[str, str],
    count: Callable[[str], int],
) -> ToolOutputPlan:
    results, turns = _results(messages, options.keep_tools)
    masked_below = masked_turns(turns, options.keep_turns)
    last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == ROLE_ASSISTANT), default=-1)
    contents: dict[int, str] = {}
    compressed: set[int] = set()
    fresh: dict[str, str] = {}
    fresh_at: set[int] = set()
    originals: dict[str, str] = {}
    for result in results:
        if result.turn is not None and result.turn < masked_below:
            line = placeholder(result.tool, result.arguments, result.text, result.ref, options.retrieve)
            if len(result.text) >= MASK_GAIN * len(line):
                contents[result.index] = line
                originals[result.ref] = result.text
            continue
        text = before.get(result.key)
        if text is None and result.index > last_assistant and count(result.text) >= options.min_tokens:
            made = compress(result.text, options.retrieve)
            if made is not None:
                text = fresh[result.key] = made.text
                fresh_at.add(result.index)
        if text is not None:
            contents[result.index] = text
            compressed.add(result.index)
            originals[result.ref] = result.text
    return ToolOutputPlan(contents, frozenset(compressed), fresh, originals, frozenset(fresh_at))


def _results(messages: Sequence[Mapping[str, Any]], keep_tools: frozenset[str]) -> tuple[list[Result], int]:
    """The results that may change, and the number of agent turns."""
    calls: dict[object, tuple[int, str | None, object]] = {}
    turns = 0
    out: list[Result] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == ROLE_ASSISTANT and message.get("tool_calls"):
            for call in message.get("tool_calls") or ():
                if isinstance(call, Mapping):
                    function = call.get("function")
                    function = function if isinstance(function, Mapping) else {}
                    name = function.get("name")
                    calls[call.get("id")] = (turns, name if isinstance(name, str) else None, function.get("arguments"))
            turns += 1
        elif role == ROLE_TOOL:
            text = result_text(message)
            turn, tool, arguments = calls.get(message.get("tool_call_id"), (None, None, None))
            if text is None or tool in keep_tools:
                continue
            ref = ref_of(text)
            out.append(Result(index, f"{ref}:{message.get('tool_call_id')}", ref, text, tool, arguments, turn))
    return out, turns


def result_text(message: Mapping[str, Any]) -> str | None:
    """A tool message's text, when it is all text and not marked for caching; else None."""
    if CACHE_MARK in message or any(isinstance(v, Mapping) and CACHE_MARK in v for v in message.values()):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        return None
    texts = []
    for part in content:
        if not isinstance(part, Mapping) or part.get("type") != "text" or CACHE_MARK in part:
            return None
        text = part.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "\n".join(texts)

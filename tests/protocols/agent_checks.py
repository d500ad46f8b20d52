"""What must hold of a real agent's request once ctxproxy has forwarded it (pure helpers).

* :func:`top_level_spans`: each top-level field of a JSON object as the exact text it was sent as,
  so a field ctxproxy does not own can be checked byte for byte (:func:`with_field` replaces one);
* :func:`kept_in_order`: the client's content blocks found in the forwarded messages are the
  client's own, in the client's order, ending with an unbroken tail of the conversation;
* :func:`tool_pairs_intact`: every ``tool_use`` is answered at the start of the next message and
  every ``tool_result`` answers the message before;
* :func:`long_session`: a Claude Code conversation grown past a window with rounds of Bash calls
  and their results, in the shape Claude Code sends them.
"""

from __future__ import annotations

import json
from typing import Any

_DECODER = json.JSONDecoder()
_WS = " \t\r\n"


def top_level_spans(raw: str) -> dict[str, str]:
    """Each top-level field of the JSON object ``raw`` → its value's text exactly as in ``raw``."""
    spans: dict[str, str] = {}
    i = len(raw) - len(raw.lstrip(_WS))
    assert raw[i] == "{", "not a JSON object"
    i += 1
    while True:
        i += len(raw[i:]) - len(raw[i:].lstrip(_WS))
        if raw[i] == "}":
            return spans
        key, i = _DECODER.raw_decode(raw, i)
        i = raw.index(":", i) + 1
        i += len(raw[i:]) - len(raw[i:].lstrip(_WS))
        _, end = _DECODER.raw_decode(raw, i)
        spans[key] = raw[i:end]
        i = end + len(raw[end:]) - len(raw[end:].lstrip(_WS))
        if raw[i] == ",":
            i += 1


def with_field(raw: str, key: str, value: Any) -> str:
    """``raw`` with top-level field ``key`` set to ``value`` (compact JSON, as the CLIs write it),
    every other field's text as it was."""
    spans = {**top_level_spans(raw), key: json.dumps(value, ensure_ascii=False, separators=(",", ":"))}
    return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{text}" for k, text in spans.items()) + "}"


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def _plain(block: dict[str, Any]) -> str:
    """A block without its cache breakpoint (ctxproxy may move those), as comparable text."""
    return json.dumps({k: v for k, v in block.items() if k != "cache_control"}, sort_keys=True)


def _flat(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], _plain(b)) for m in messages for b in blocks(m)]


def kept_in_order(sent: list[dict[str, Any]], forwarded: list[dict[str, Any]]) -> int:
    """Assert that the forwarded blocks that are the client's (role and content equal, cache
    breakpoints aside) appear in the client's order, none twice (a block equal to one of the
    client's can only be the client's), and that they end with an unbroken
    tail of the client's conversation that holds at least its newest message. Answers how many of
    the client's blocks that tail holds."""
    original = _flat(sent)
    positions = {block: [] for block in original}  # type: dict[tuple[str, str], list[int]]
    for at, block in enumerate(original):
        positions[block].append(at)
    found, last = [], -1
    for block in _flat(forwarded):
        if block not in positions:
            continue  # ctxproxy's own (a summary, memories)
        later = [at for at in positions[block] if at > last]
        assert later, f"a block of the client's repeated or out of order: {block[1][:120]}"
        found.append(later[0])
        last = later[0]
    tail = 0
    while tail < len(found) and found[len(found) - 1 - tail] == len(original) - 1 - tail:
        tail += 1
    assert tail >= len(blocks(sent[-1])), f"the newest message was not kept whole: {found[-5:]} of {len(original)}"
    return tail


def tool_pairs_intact(messages: list[dict[str, Any]]) -> None:
    for i, message in enumerate(messages):
        uses = [b["id"] for b in blocks(message) if b.get("type") == "tool_use"]
        if uses:
            assert i + 1 < len(messages), f"messages[{i}]: tool_use with no message after it"
            after = blocks(messages[i + 1])
            answered = [b["tool_use_id"] for b in after[: len(uses)] if b.get("type") == "tool_result"]
            assert messages[i + 1]["role"] == "user" and sorted(answered) == sorted(uses), (i, uses, answered)
        results = [b["tool_use_id"] for b in blocks(message) if b.get("type") == "tool_result"]
        if results:
            before = {b["id"] for b in blocks(messages[i - 1]) if b.get("type") == "tool_use"} if i else set()
            assert set(results) <= before, f"messages[{i}]: results {results} answer no tool_use before"


def _round(i: int, size: int) -> list[dict[str, Any]]:
    """One round of work as Claude Code sends it: the user asks, the model runs Bash, the result
    comes back as a user turn, the model reports."""
    tool_id = f"toolu_long{i:03d}"
    lines = "\n".join(
        f"2026-11-27T10:{i % 60:02d}:{k % 60:02d} ERROR worker-{k} disk full on /var/{i}" for k in range(size)
    )
    command = {"command": f"grep ERROR logs/part-{i}.log", "description": f"Show the ERROR lines of part {i}"}
    return [
        {"role": "user", "content": [{"type": "text", "text": f"Now look at logs/part-{i}.log."}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": command}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": lines, "is_error": False}],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": f"Part {i} has {size} ERROR lines, all disk full."}],
        },
    ]


def long_session(body: dict[str, Any], rounds: int, size: int) -> dict[str, Any]:
    """``body`` (a Claude Code request whose last two messages are an assistant answer and the
    user's newest message) with ``rounds`` rounds of ``size`` log lines each inserted before them."""
    messages = body["messages"]
    assert messages[-2]["role"] == "assistant" and messages[-1]["role"] == "user"
    grown = messages[:-1] + [m for i in range(rounds) for m in _round(i, size)] + messages[-1:]
    return {**body, "messages": grown}

"""Prompt-caching breakpoints through compaction: the API takes at most four ``cache_control``
markers; a compacted body gets one on its summary and keeps the client's latest."""

from __future__ import annotations

import json
from typing import Any

from tests.anthropic.conftest import MODEL, Claude, MakeProxy, blocks, check_shape, conversation

EPHEMERAL = {"type": "ephemeral"}
SUMMARY = "Context Summary"


def marked(body: dict[str, Any]) -> list[str]:
    """A short text of every block (tool, system, message) that carries ``cache_control``."""
    system = body.get("system")
    items = [*(body.get("tools") or []), *(system if isinstance(system, list) else [])]
    items += [b for m in body["messages"] for b in blocks(m)]
    return [json.dumps(item)[:200] for item in items if item.get("cache_control") is not None]


def with_marks(messages: list[dict[str, Any]], *indices: int) -> list[dict[str, Any]]:
    """``messages`` with a breakpoint on the last block of each message at ``indices``."""
    out = [dict(m) for m in messages]
    for i in indices:
        content = blocks(out[i])
        out[i]["content"] = [*content[:-1], {**content[-1], "cache_control": EPHEMERAL}]
    return out


async def compact(make_proxy: MakeProxy, claude: Claude, **body: Any) -> dict[str, Any]:
    # Memory off: what these tests count is the client's own tools and breakpoints.
    client, _ = await make_proxy(window=4_000, strategy="rolling_summary", extra="[memory]\nenabled = false\n")
    raw = await client.messages.with_raw_response.create(model=MODEL, max_tokens=200, **body)
    assert raw.headers["X-Ctx-Compacted"] == "1"
    (sent,) = [r.json() for r in claude.fake.message_requests()]  # the fake refuses a 5th breakpoint
    check_shape(sent)
    return sent


async def test_four_breakpoints_and_a_summary_make_four(make_proxy: MakeProxy, claude: Claude) -> None:
    tool = {"name": "flights", "description": "Find flights", "input_schema": {"type": "object"}}
    tools = [{**tool, "cache_control": EPHEMERAL}]
    messages = with_marks(conversation(30), -2, -1)
    system = [{"type": "text", "text": "You plan trips.", "cache_control": EPHEMERAL}]
    assert len(marked({"tools": tools, "system": system, "messages": messages})) == 4
    sent = await compact(make_proxy, claude, tools=tools, system=system, messages=messages)
    marks = marked(sent)
    assert len(marks) == 4 and sum(SUMMARY in mark for mark in marks) == 1
    # The earliest goes (the summary's covers the tools); the latest stay: they cache new turns.
    assert sent["tools"] == [tool] and sent["system"] == system
    assert sent["messages"][-2:] == messages[-2:]


async def test_two_breakpoints_in_kept_blocks_stay(make_proxy: MakeProxy, claude: Claude) -> None:
    messages = with_marks(conversation(30), -3, -1)
    sent = await compact(make_proxy, claude, system="You plan trips.", messages=messages)
    marks = marked(sent)
    assert len(marks) == 3 and SUMMARY in marks[0]
    assert sent["messages"][-3:] == messages[-3:]

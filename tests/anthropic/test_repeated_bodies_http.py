"""A body sent again shares its parsed fields after the messages (``tools``, ``system``,
``metadata``) with the previous request's (``ctxproxy.wire.incremental``): whatever ctxproxy
does to a compacted Claude body — ctxproxy's tools appended, a summary's breakpoint, the earliest
breakpoints dropped beyond four — it does to copies, so the same body, sent again, is forwarded
as it was the first time."""

from __future__ import annotations

from typing import Any

from tests.anthropic.conftest import MODEL, Claude, MakeProxy, check_shape, conversation

EPHEMERAL = {"type": "ephemeral"}


async def test_the_same_compacted_body_is_forwarded_the_same_every_time(make_proxy: MakeProxy, claude: Claude) -> None:
    client, _ = await make_proxy(window=4_000, strategy="rolling_summary")
    tools = [
        {"name": f"tool_{i}", "description": "Find flights " * 20, "input_schema": {"type": "object"}} for i in range(3)
    ]
    tools = [{**tool, "cache_control": EPHEMERAL} for tool in tools]  # five breakpoints with the system's
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 200,
        "messages": conversation(30),
        "system": [{"type": "text", "text": "You plan trips.", "cache_control": EPHEMERAL}],
        "tools": tools,
        "metadata": {"user_id": "u-1"},
    }
    raw = await client.messages.with_raw_response.create(**body)
    assert raw.headers["X-Ctx-Compacted"] == "1"
    for _ in range(2):  # the summary applied again, from the session's checkpoint
        await client.messages.create(**body)
    first, *again = [r.json() for r in claude.fake.message_requests()]
    check_shape(first)
    names = [tool["name"] for tool in first["tools"]]
    assert names[:3] == ["tool_0", "tool_1", "tool_2"] and len(names) > 3  # ctxproxy's own after the client's
    assert first["tools"][0] == {k: v for k, v in tools[0].items() if k != "cache_control"}  # dropped: a fifth
    assert again == [first, first]

"""Request shapes from the Messages API reference (the ``anthropic`` SDK's beta types) and from
real clients: ctxproxy is never stricter than the API. Each shape goes through a compacting
tenant with every strategy: answered 2xx by a fake that validates like the API, never
"forwarded as sent" (ctxproxy models it), and what ctxproxy keeps of it reaches the upstream as
the client sent it — blocks and fields it has never heard of included."""

from __future__ import annotations

from typing import Any

import pytest

from ctxproxy.strategies.registry import builtin_registry
from tests.anthropic.conftest import MODEL, SENTENCES, Claude, MakeProxy, check_shape

BETA = {"anthropic-beta": "mid-conversation-system-2026-04-07,context-management-2025-06-27"}
STRATEGIES = sorted(builtin_registry())

# Blocks a user message may carry (beyond text and tool results).
USER_BLOCKS: list[dict[str, Any]] = [
    {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}, "citations": {}},
    {"type": "search_result", "source": "https://x.test", "title": "t", "content": [{"type": "text", "text": "r"}]},
    {"type": "container_upload", "file_id": "file_011"},
]
# Blocks of an assistant message: thinking, server tools and their results, MCP, compaction ...
ASSISTANT_BLOCKS: list[dict[str, Any]] = [
    {"type": "thinking", "thinking": "Let me see.", "signature": "EqQBCkYIBxgC"},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "rain"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
    {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "lookup", "server_name": "db", "input": {"q": 1}},
    {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "is_error": False, "content": "ok"},
    {"type": "compaction", "content": "Summary of the earlier work."},
    {"type": "hologram_2031", "payload": {"z": 1}},  # a type no SDK knows yet
]
TOP_LEVEL: dict[str, Any] = {
    "thinking": {"type": "adaptive"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "output_config": {"effort": "high"},
    "service_tier": "auto",
    "container": "container_011",
    "mcp_servers": [{"type": "url", "url": "https://mcp.x.test", "name": "db"}],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    "tools": [
        {"name": "Bash", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    ],
}


def session(turns: int, offset: int = 0) -> list[dict[str, Any]]:
    """``turns`` exchanges, each user turn carrying one of USER_BLOCKS and each assistant turn one
    of ASSISTANT_BLOCKS and a Bash call answered in the next user turn; a system message after
    the first user message, as Claude Code sends it."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Start the audit."}]},
        {"role": "system", "content": "Agents: general, Explore.", "clear_at": "never"},
    ]
    for i in range(offset, offset + turns):
        text = " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(4))
        call = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": f"ls dir{i}"}}
        said = {"type": "text", "text": f"Step {i}. {text}"}
        messages.append({"role": "assistant", "content": [ASSISTANT_BLOCKS[i % len(ASSISTANT_BLOCKS)], said, call]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": [{"type": "text", "text": text}]}
        extra = USER_BLOCKS[i % len(USER_BLOCKS)]
        messages.append({"role": "user", "content": [result, extra, {"type": "text", "text": f"Go on {i}."}]})
    return messages


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("offset", [0, 4])  # four turns each: short of every strategy's own trigger
async def test_every_shape_fits_through_every_strategy(
    make_proxy: MakeProxy, claude: Claude, strategy: str, offset: int
) -> None:
    client, _ = await make_proxy(window=200_000, strategy=strategy, extra="[memory]\nenabled = false\n")
    messages = session(4, offset)
    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=64, messages=messages, extra_headers=BETA, extra_body=TOP_LEVEL
    )
    assert raw.http_response.status_code == 200
    assert "X-Ctx-Forwarded-As-Sent" not in raw.headers
    body = claude.fake.message_requests()[-1].json()
    assert body["messages"] == messages
    assert {key: body[key] for key in TOP_LEVEL if key != "tools"} == {
        k: v for k, v in TOP_LEVEL.items() if k != "tools"
    }
    assert body["tools"][: len(TOP_LEVEL["tools"])] == TOP_LEVEL["tools"]  # ctxproxy's own may follow


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_every_shape_survives_compaction(make_proxy: MakeProxy, claude: Claude, strategy: str) -> None:
    client, _ = await make_proxy(window=4_000, strategy=strategy, extra="[memory]\nenabled = false\n")
    history = session(3 * len(ASSISTANT_BLOCKS))
    compacted = False
    for end in range(len(history) - 16, len(history) + 1, 2):
        raw = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, messages=history[:end], extra_headers=BETA, extra_body=TOP_LEVEL
        )
        assert raw.http_response.status_code == 200
        assert "X-Ctx-Forwarded-As-Sent" not in raw.headers
        compacted = compacted or "X-Ctx-Summarized" in raw.headers
    assert compacted
    body = claude.fake.message_requests()[-1].json()
    check_shape({"messages": [m for m in body["messages"] if m["role"] != "system"]})
    sent = [m for m in history if m["role"] != "system"]
    forwarded = [m for m in body["messages"] if m["role"] != "system"]
    same = 0
    while same < len(forwarded) and forwarded[-1 - same] == sent[-1 - same]:
        same += 1
    # Everything after ctxproxy's own turns (the summary or Contents Page, merged with at most the
    # first kept client message) is the client's, as sent and in order.
    assert same >= 2 and same >= len(forwarded) - 2, (same, len(forwarded))
    assert [m for m in body["messages"] if m["role"] == "system"] == [history[1]]

"""Claude Code's newest shape: a ``role: "system"`` message inside ``messages`` (with the
``mid-conversation-system-…`` beta). ctxproxy is never stricter than the API: such a request is
compacted like any other, the system message stays where the client put it while its part of the
conversation is kept, and right after the first message once a compaction covers it (never lost,
never first) — for every strategy, JSON and streamed, through the real ``anthropic`` SDK by base
URL only."""

from __future__ import annotations

from typing import Any

import pytest

from ctxproxy.strategies.registry import builtin_registry
from tests.anthropic.conftest import MODEL, SENTENCES, Claude, MakeProxy, check_shape

BETA = {"anthropic-beta": "claude-code-20250219,context-1m-2025-08-07,mid-conversation-system-2026-04-07"}
AGENTS = "Available agent types for the Agent tool:\n- general: anything (Tools: *)\n- Explore: read-only search"
REMINDER = "<system-reminder>\nToday's date is 2026-11-27.\n</system-reminder>"
STRATEGIES = sorted(builtin_registry())
EXTRA = "[memory]\nenabled = false\n"


def claude_code(turns: int) -> list[dict[str, Any]]:
    """A Claude Code session: the first user turn (a reminder block, then the request), the
    agent list as a system message, then ``turns`` exchanges with a Bash tool round trip each."""
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": REMINDER},
                {"type": "text", "text": "count the ERROR lines in log A"},
            ],
        },
        {"role": "system", "content": AGENTS},
    ]
    for i in range(turns):
        text = " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(5))
        call = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": f"grep -c ERROR a{i}.log"}}
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Checking {i}."}, call]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"{40 + i}\n{text}"}
        messages.append({"role": "user", "content": [result]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Found {40 + i}. {text}"}]})
        messages.append({"role": "user", "content": [{"type": "text", "text": f"now log {i + 1}. {text}"}]})
    return messages


def forwarded_system_messages(body: dict[str, Any]) -> list[int]:
    return [i for i, m in enumerate(body["messages"]) if m["role"] == "system"]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("stream", [False, True])
async def test_first_request_ending_in_a_system_message(
    make_proxy: MakeProxy, claude: Claude, strategy: str, stream: bool
) -> None:
    client, _ = await make_proxy(strategy=strategy, extra=EXTRA)
    messages = claude_code(0)
    extra: dict[str, Any] = {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}}
    if stream:
        async with client.messages.stream(
            model=MODEL, max_tokens=64, messages=messages, extra_headers=BETA, extra_body=extra
        ) as events:
            text = await events.get_final_text()
    else:
        answer = await client.messages.create(
            model=MODEL, max_tokens=64, messages=messages, extra_headers=BETA, extra_body=extra
        )
        text = answer.content[0].text  # type: ignore[union-attr]
    assert text
    sent = claude.fake.message_requests()[-1]
    body = sent.json()
    assert body["messages"] == messages  # as sent, the system message last
    assert body["thinking"] == {"type": "adaptive"} and body["output_config"] == {"effort": "high"}
    assert "mid-conversation-system-2026-04-07" in sent.headers["anthropic-beta"]


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_kept_system_message_stays_in_place(make_proxy: MakeProxy, claude: Claude, strategy: str) -> None:
    client, _ = await make_proxy(strategy=strategy, extra=EXTRA)
    messages = claude_code(2)
    raw = await client.messages.with_raw_response.create(
        model=MODEL, max_tokens=64, messages=messages, extra_headers=BETA
    )
    assert raw.http_response.status_code == 200
    assert "X-Ctx-Forwarded-As-Sent" not in raw.headers
    assert claude.fake.message_requests()[-1].json()["messages"] == messages


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_long_session_compacts_with_the_system_message(
    make_proxy: MakeProxy, claude: Claude, strategy: str
) -> None:
    client, _ = await make_proxy(window=5_000, strategy=strategy, extra=EXTRA)
    history = claude_code(20)
    compacted = False
    for end in range(len(history) - 40, len(history) + 1, 4):  # the session's later requests
        raw = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, messages=history[:end], extra_headers=BETA
        )
        assert raw.http_response.status_code == 200
        compacted = compacted or "X-Ctx-Summarized" in raw.headers or "X-Ctx-Compacted" in raw.headers
    assert compacted
    body = claude.fake.message_requests()[-1].json()
    check_shape({"messages": [m for m in body["messages"] if m["role"] != "system"]})
    assert body["messages"][-1] == history[-1]  # the newest message untouched
    at = forwarded_system_messages(body)
    assert [body["messages"][i] for i in at] == [history[1]]  # as the client sent it: never lost
    assert at[0] >= 1  # never first

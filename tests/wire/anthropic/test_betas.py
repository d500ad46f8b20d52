"""The window an ``anthropic-beta`` header asks for (``wire.anthropic.betas``)."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from ctxproxy.compaction.window_hints import WindowHint
from ctxproxy.pipeline.turn import Turn
from ctxproxy.wire.anthropic.adapter import AnthropicMessages
from ctxproxy.wire.anthropic.betas import asked_window
from ctxproxy.wire.openai_chat.adapter import OpenAIChat

CLAUDE_CODE = (
    "claude-code-20250219,context-1m-2025-08-07,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"
)


def headers(*values: str) -> CIMultiDict[str]:
    found: CIMultiDict[str] = CIMultiDict()
    for value in values:
        found.add("Anthropic-Beta", value)
    return found


@pytest.mark.parametrize(
    ("values", "beta"),
    [
        ((CLAUDE_CODE,), "context-1m-2025-08-07"),
        (("context-1m-2025-08-07",), "context-1m-2025-08-07"),
        (("claude-code-20250219", " context-1m-2026-01-15 "), "context-1m-2026-01-15"),  # repeated, any date
        (("oauth-2025-04-20 , CONTEXT-1M-2025-08-07",), "CONTEXT-1M-2025-08-07"),
    ],
)
def test_context_1m_asks_for_a_million(values: tuple[str, ...], beta: str) -> None:
    assert asked_window(headers(*values)) == WindowHint(1_000_000, f"anthropic-beta {beta}")


def test_the_smallest_size_asked_for_wins() -> None:
    asked = asked_window(headers("context-2m-2027-01-01", "context-500k-2026-06-01,context-1m-2025-08-07"))
    assert asked == WindowHint(500_000, "anthropic-beta context-500k-2026-06-01")


@pytest.mark.parametrize(
    "values",
    [
        (),
        ("claude-code-20250219,interleaved-thinking-2025-05-14",),
        ("context-management-2025-06-27",),  # a context beta that is no size
        ("context-1m",),  # no date: not the beta's form
        ("xcontext-1m-2025-08-07",),
        ("context-0m-2025-08-07",),
        ("",),
    ],
)
def test_other_betas_ask_for_nothing(values: tuple[str, ...]) -> None:
    assert asked_window(headers(*values)) is None


def test_the_adapters_say_what_the_client_asked_for() -> None:
    turn = Turn({"model": "claude-opus-4-8"}, b"", [], "claude-opus-4-8", stream=False, user=None)
    asked = headers(CLAUDE_CODE)
    assert AnthropicMessages().window_asked(turn, asked) == WindowHint(
        1_000_000, "anthropic-beta context-1m-2025-08-07"
    )
    assert OpenAIChat().window_asked(turn, asked) is None  # the header is Anthropic's

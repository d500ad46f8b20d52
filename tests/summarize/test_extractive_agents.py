"""Extractive summaries of agent sessions name the work, not the client's scaffolding (issue 21.4)."""

from __future__ import annotations

import re

import pytest

from ctxproxy.summarize import ExtractiveSummarizer, SummaryTask
from ctxproxy.tokens import TokenCounter
from tests.summarize.agent_sessions import (
    CODEX_REQUEST,
    CODEX_SECOND_REQUEST,
    HOUSE_RULES,
    REQUEST,
    SECOND_REQUEST,
    agent_types,
    claude_code_session,
    codex_session,
)
from tests.summarize.factories import assert_contract_shape, section, user

# What Claude Code and Codex put into every request that no summary should repeat.
SCAFFOLDING_WORDS = (
    "system-reminder",
    "currentDate",
    "Today's date",
    "may or may not be relevant",
    "malware",
    "Available agent types",
    "statusline-setup",
    "general-purpose",
    "deep-research",
    "AGENTS.md",
    "INSTRUCTIONS",
    "four hundred lines",
    "environment_context",
    "<cwd>",
    "sandbox",
    "House rules",
)


def summarize(counter: TokenCounter, task: SummaryTask) -> str:
    return ExtractiveSummarizer(counter).summarize_text(task)


def assert_no_scaffolding(body: str) -> None:
    found = [word for word in SCAFFOLDING_WORDS if word.casefold() in body.casefold()]
    assert found == [], body
    assert not [line for line in agent_types().splitlines() if len(line) > 20 and line in body], body


@pytest.mark.parametrize("max_tokens", [1200, 300, 120])
def test_claude_code_session(counter: TokenCounter, max_tokens: int) -> None:
    body = summarize(counter, SummaryTask("fresh", claude_code_session(), max_tokens=max_tokens))
    assert section(body, "Goal") == [f"- {REQUEST}"]
    assert_no_scaffolding(body)
    assert_contract_shape(body)
    if max_tokens >= 300:
        assert section(body, "Requests") == [f"- {SECOND_REQUEST}"]
        assert section(body, "Commands") == ["- `grep -c ERROR a.log` → 42"]
        assert section(body, "Errors") == ["- Read: File does not exist."]
        # the failed read names a file that is neither read nor modified: only seen
        assert section(body, "Files") == ["Read: a.log", "Modified: /work/logs/count.py", "Seen: /work/logs/missing.py"]


def test_claude_code_session_before_and_after_a_split(counter: TokenCounter) -> None:
    session = claude_code_session()
    second_turn = next(
        i for i, m in enumerate(session) if m["role"] == "user" and i > 1 and m["content"][-1]["text"] == SECOND_REQUEST
    )
    first = summarize(counter, SummaryTask("fresh", session[:second_turn], context=session))
    body = summarize(counter, SummaryTask("update", session[second_turn:], first, context=session))
    assert section(body, "Goal") == [f"- {REQUEST}"]  # kept from the previous summary
    assert section(body, "Requests") == [f"- {SECOND_REQUEST}"]
    assert "- `grep -c ERROR a.log` → 42" in section(body, "Commands")
    assert_no_scaffolding(body)
    turn = summarize(counter, SummaryTask("split_turn", session[second_turn:], context=session))
    assert section(turn, "Goal") == [f"- {SECOND_REQUEST}"]
    assert_no_scaffolding(turn)


def test_codex_session(counter: TokenCounter) -> None:
    body = summarize(counter, SummaryTask("fresh", codex_session()))
    assert section(body, "Goal") == [f"- {CODEX_REQUEST}"]
    assert section(body, "Requests") == [f"- {CODEX_SECOND_REQUEST}"]
    assert section(body, "Commands") == [
        "- `grep -c ERROR a.log` → 3",
        "- `sed -n '1,40p' src/app.py` → def answer():",
        "- `pytest -q tests/test_app.py` → failed (exit 1): E AssertionError: assert 1 == 2",
    ]
    assert section(body, "Decisions") == ["- assistant: We'll keep the fix local to src/app.py; the test passes now."]
    assert section(body, "Files") == ["Read: a.log", "Modified: src/app.py", "Seen: tests/test_app.py"]  # pytest's
    assert_no_scaffolding(body)
    assert_contract_shape(body)


def test_text_repeated_elsewhere_in_the_conversation_is_scaffolding_in_the_range(counter: TokenCounter) -> None:
    session = codex_session()
    cut = 9  # the range holds the house rules once; the conversation, twice
    assert sum(HOUSE_RULES in str(m["content"]) for m in session[:cut]) == 1
    assert "House rules" in summarize(counter, SummaryTask("fresh", session[:cut]))
    assert_no_scaffolding(summarize(counter, SummaryTask("fresh", session[:cut], context=session)))


def test_a_range_of_nothing_but_scaffolding_still_says_something(counter: TokenCounter) -> None:
    body = summarize(
        counter, SummaryTask("fresh", [user("<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>")])
    )
    assert re.fullmatch(r"### Background\n- \[user\] <environment_context>.*", body, re.S), body


def test_a_summariser_that_read_the_conversation_before_summarises_it_alike(counter: TokenCounter) -> None:
    """Its memo of the texts' repetition keys (the whole history is read at every summary)
    changes nothing: each summary equals a fresh summariser's, scaffolding removed."""
    session = claude_code_session()
    reused = ExtractiveSummarizer(counter)
    for cut in range(2, len(session), 3):
        for task in (
            SummaryTask("fresh", session[:cut], context=session),
            SummaryTask("split_turn", session[cut:], context=session),
        ):
            body = reused.summarize_text(task)
            assert body == summarize(counter, task)
            assert_no_scaffolding(body)

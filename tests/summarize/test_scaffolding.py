"""What agent clients repeat every turn is told apart from what the user said (summarize/scaffolding.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ctxproxy.summarize.scaffolding import MIN_REPEATED_CHARS, strip_scaffolding, strip_text
from tests.summarize.agent_sessions import AGENTS_MD, ENVIRONMENT, agent_types, reminder_block
from tests.summarize.factories import assistant, tool, user

# A paragraph a client pastes into every turn, untagged, long enough to count.
BOILERPLATE = (
    "Context for the assistant: the user works in the payments team; answer in English and cite file paths "
    "relative to the repository root."
)


def test_a_claude_code_reminder_block_goes_and_the_users_words_stay() -> None:
    message = user([reminder_block(), {"type": "text", "text": "count the ERROR lines in log A"}])
    [cleaned] = strip_scaffolding([message])
    assert cleaned["content"] == [{"type": "text", "text": "count the ERROR lines in log A"}]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"{AGENTS_MD}\n\n{ENVIRONMENT}\n\nFix the build", "Fix the build"),  # the heading that introduces it goes too
        (
            "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>",
            "",
        ),
        ("<local-command-stdout>Set model to opus</local-command-stdout>", ""),
        ("Before\n  <system-reminder>\nx\n  </system-reminder>\nAfter", "Before\n\nAfter"),
        (
            "# Notes\n\nKeep this heading: it introduces no client block.",
            "# Notes\n\nKeep this heading: it introduces no client block.",
        ),
    ],
)
def test_wrapper_blocks_are_removed(text: str, expected: str) -> None:
    assert strip_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Why does my summary say `<system-reminder>`? Look at it.",  # a mention, not a block
        "<instructions>Summarise the document below.</instructions>\n<document>Q3 report</document>",  # the app's own tags
        "<system-reminder>\nnever closed, so not a block",
        "Plain text\n\n\n\nwith   odd\tspacing\n",
    ],
)
def test_text_without_a_client_block_is_returned_as_it_was(text: str) -> None:
    assert strip_text(text) is text


def test_text_repeated_across_user_turns_goes_and_short_repeats_stay() -> None:
    assert len(BOILERPLATE) >= MIN_REPEATED_CHARS
    messages = [
        user(f"{BOILERPLATE}\n\nCount the ERROR lines in a.log"),
        assistant("There are 3."),
        user(f"{BOILERPLATE}\n\nCount the ERROR lines in a.log"),  # the request said twice: short, the user's
        user("Thanks!"),
        user("Thanks!"),
    ]
    cleaned = strip_scaffolding(messages)
    assert [m["content"] for m in cleaned] == [
        "Count the ERROR lines in a.log",
        "There are 3.",
        "Count the ERROR lines in a.log",
        "Thanks!",
        "Thanks!",
    ]
    assert cleaned[1] is messages[1] and cleaned[3] is messages[3]  # unchanged messages are the same objects


def test_repetition_counts_across_the_whole_conversation_and_system_messages() -> None:
    system = {"role": "system", "content": agent_types()}
    echoed = user([{"type": "text", "text": agent_types()}, {"type": "text", "text": "Which agent reviews code?"}])
    once = user(f"{BOILERPLATE}\n\nShip it")
    context = [system, user(BOILERPLATE), echoed, once]
    assert strip_scaffolding([echoed, once]) == [echoed, once]  # within the range alone, nothing repeats
    cleaned = strip_scaffolding([echoed, once], context)
    assert [m["content"] for m in cleaned] == [[{"type": "text", "text": "Which agent reviews code?"}], "Ship it"]


def test_a_user_message_left_empty_is_dropped_but_not_its_image_nor_a_tool_result() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages: list[dict[str, Any]] = [
        user(ENVIRONMENT),
        user([reminder_block(), image]),
        assistant(None, ("Read", '{"file_path": "a.py"}')),
        tool("<system-reminder>\nConsider whether the file is malware.\n</system-reminder>"),
    ]
    cleaned = strip_scaffolding(messages)
    assert [m["role"] for m in cleaned] == ["user", "assistant", "tool"]
    assert cleaned[0]["content"] == [image]
    assert cleaned[2]["content"] == ""


def test_a_tool_result_loses_reminders_but_keeps_what_it_repeats() -> None:
    result = tool(f"{BOILERPLATE}\n\n<system-reminder>\nA reminder.\n</system-reminder>")
    cleaned = strip_scaffolding([user(BOILERPLATE), user(BOILERPLATE), result])[-1]
    assert cleaned["content"] == BOILERPLATE  # what the tool returned, even when a user turn says it too


def test_cost_stays_linear_on_unclosed_tags_and_long_blank_lines() -> None:
    hostile = "<a>\n" * 50_000 + " " * 200_000 + "\n" + "<b x='1'>\n" * 20_000
    started = time.perf_counter()
    assert strip_text(hostile, frozenset({b"x" * 16})) == hostile
    strip_scaffolding([user(hostile), user(hostile)])
    assert time.perf_counter() - started < 5  # quadratic would take minutes

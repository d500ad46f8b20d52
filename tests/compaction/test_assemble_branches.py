"""Where branch summaries go in what is forwarded (``ctxproxy.compaction.assemble``), pure: before
the client's message each names, after any restored pages when that message is not covered,
right after the summary (before the restored pages) when it is — whatever else is forwarded, the
same list for the same inputs."""

from __future__ import annotations

from typing import Any

from ctxproxy.compaction.assemble import assemble, summary_count, with_branches
from ctxproxy.strategies.base import Block, Checkpoint
from ctxproxy.strategies.branch import BRANCH_HEADER, BRANCH_KIND
from ctxproxy.strategies.registry import builtin_registry
from tests.strategies.factories import assistant, system, user

KINDS = builtin_registry().kinds


def conversation() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [system()]
    for n in range(1, 6):
        messages += [user(f"question {n}"), assistant(f"answer {n}")]
    return messages  # 11 messages


def branch(at: int, text: str) -> Checkpoint:
    return Checkpoint(at + 1, "p", (Block(at, at, text, BRANCH_KIND),), float(at))


def contents(forwarded: list[dict[str, Any]]) -> list[str]:
    return [
        str(m["content"]).split("\n\n")[-1] if str(m["content"]).startswith("## ") else m["content"] for m in forwarded
    ]


def test_branch_summaries_go_before_their_message_and_around_what_is_restored() -> None:
    messages = conversation()
    checkpoint = Checkpoint(6, "p", (Block(1, 6, "the summary"),), 1.0)
    restored = [messages[2], messages[3]]
    branches = [branch(4, "left at 4"), branch(8, "left at 8")]

    forwarded = assemble(messages, 1, checkpoint, "user", KINDS, restored)
    out = with_branches(forwarded, messages, 1, checkpoint, branches, KINDS, len(restored))

    assert contents(out) == [
        messages[0]["content"],
        "the summary",
        "left at 4",  # covered by the summary: right after it, before what is restored
        "answer 1",
        "question 2",
        "answer 3",
        "question 4",
        "left at 8",
        "answer 4",
        "question 5",
        "answer 5",
    ]
    assert sum(str(m["content"]).startswith(BRANCH_HEADER) for m in out) == 2


def test_without_a_checkpoint_a_branch_summary_goes_before_its_message() -> None:
    messages = conversation()
    out = with_branches(list(messages), messages, 1, None, [branch(3, "left at 3")], KINDS)
    assert contents(out)[2:5] == ["answer 1", "left at 3", "question 2"]


def test_the_summary_count_is_the_number_of_summary_messages_assemble_forwards() -> None:
    names = ["history", "turn_prefix", "rounds", "contents", "unknown"]
    messages = [system("s"), *(m for i in range(20) for m in (user(f"u{i}"), assistant(f"a{i}"))), user("last")]
    for first in names:
        for rest in ([], ["rounds"], ["turn_prefix"], ["rounds", "rounds"], ["history"]):
            blocks = tuple(Block(1 + 4 * i, 5 + 4 * i, f"block {i}", kind) for i, kind in enumerate([first, *rest]))
            checkpoint = Checkpoint(blocks[-1].end, "0" * 32, blocks, 1.0)
            forwarded = assemble(messages, 1, checkpoint, "system", KINDS)
            kept = len(messages) - checkpoint.end
            assert summary_count(checkpoint, KINDS) == len(KINDS.texts(blocks)) == len(forwarded) - 1 - kept

"""A release engineer's conversation for the ``paged`` tests, and its archival by the real code
(``PagedStrategy.plan`` + ``archive_pages``, extractive page lines)."""

from __future__ import annotations

from typing import Any

from ctxproxy.session import PrefixChain
from ctxproxy.strategies.base import Checkpoint, Plan
from ctxproxy.strategies.boundaries import leading_system_count
from ctxproxy.strategies.paged import PagedOptions, PagedStrategy
from ctxproxy.strategies.paged.archive import ArchiveResult, archive_pages
from ctxproxy.strategies.paged.contents import RecallStat
from ctxproxy.summarize.pagelines import extractive_page_lines
from ctxproxy.tokens import TokenCounter
from tests.strategies.factories import assistant, assistant_calls, conversation, system, tool, user

COUNTER = TokenCounter()


def count(text: str) -> int:
    return COUNTER.count_text(text)


def page(n: int) -> list[dict[str, Any]]:
    """Page ``n``: four messages, a tool call with its result among them."""
    return [
        user(f"Question {n}: how do I deploy service-{n} to staging?"),
        assistant_calls("read_file", ids=[f"r{n}"]),
        tool(f"r{n}", f"deploy/service-{n}.yaml: replicas: {n}"),
        assistant(f"Run `make deploy-{n}`. It uses {n} replicas."),
    ]


def request(turn: int) -> list[dict[str, Any]]:
    """Turn ``turn``: the system prompt, pages 1 … turn − 1 answered, and the new question."""
    messages: list[dict[str, Any]] = [system("You are a release engineer.")]
    for n in range(1, turn):
        messages += page(n)
    messages.append(user(f"Question {turn}: how do I deploy service-{turn} to staging?"))
    return messages


def archive(
    messages: list[dict[str, Any]],
    previous: Checkpoint | None = None,
    stats: dict[int, RecallStat] | None = None,
    options: PagedOptions | None = None,
) -> tuple[Plan, ArchiveResult]:
    """The plan for ``messages`` (which must archive something) and what executing it makes."""
    options = options if options is not None else PagedOptions()
    # The note's batch of 4 (``archive_batch`` unset, with optimise = "tokens").
    conv = conversation(messages, window=1_000_000, optimise="tokens")
    plan = PagedStrategy(options).plan(conv, previous, 0.0)
    assert plan is not None
    pages = [messages[s:e] for _, s, e in plan.state["archive"]]
    result = archive_pages(
        plan,
        messages,
        PrefixChain.of(messages),
        leading_system_count(messages),
        previous,
        [extractive_page_lines(p) for p in pages],
        stats or {},
        options,
        count,
        123.0,
    )
    return plan, result

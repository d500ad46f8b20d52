"""Prompt prints: how many leading messages two prompts share (tools first), and the bounded
per-session memory of them."""

from __future__ import annotations

import pytest

from ctxproxy.cache import ByteLRU
from ctxproxy.session import message_digest
from ctxproxy.session.prompt_prints import PromptPrint, PromptPrints, SessionPrints, tools_digest

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def prompt(texts: list[str], tools: list[dict[str, object]] | None = None) -> PromptPrint:
    digests = [message_digest({"role": "user", "content": t}) for t in texts]
    return PromptPrint.of(tools_digest(tools or []), digests)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 31, 32, 33, 100])
def test_the_shared_prefix_ends_at_the_first_changed_message(n: int) -> None:
    before = [f"m{i}" for i in range(100)]
    after = [*before[:n], "changed", *before[n + 1 :]] if n < 100 else [*before, "more"]
    assert prompt(after).shared(prompt(before)) == n
    assert prompt(before).shared(prompt(after)) == n


def test_an_appended_prompt_shares_all_of_the_previous_one() -> None:
    assert prompt(["a", "b", "c", "d"]).shared(prompt(["a", "b"])) == 2
    assert prompt(["a"]).shared(prompt(["a", "b", "c"])) == 1  # a shorter prompt: what it has
    assert prompt(["a"]).shared(None) == 0


def test_other_tools_share_nothing_because_they_come_first() -> None:
    assert prompt(["a", "b"], TOOLS).shared(prompt(["a"], TOOLS)) == 1
    assert prompt(["a", "b"], TOOLS).shared(prompt(["a"])) == 0
    assert tools_digest([]) == b"" and tools_digest(TOOLS) != tools_digest([*TOOLS, *TOOLS])


def test_prints_are_kept_per_session_within_their_bytes() -> None:
    one = SessionPrints(prompt(["a"]), prompt(["a"]))
    prints = PromptPrints(ByteLRU(2 * (one.nbytes + 300)))
    prints.remember("s1", one)
    prints.remember("s2", one)
    prints.remember("s3", one)  # the least recently used goes
    assert prints.last("s1") is None and prints.last("s3") == one
    assert 0 < prints.nbytes <= 2 * (one.nbytes + 300)

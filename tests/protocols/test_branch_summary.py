"""A fork gets its branch summary the same way in both protocols (note 003, §4: "Branch Summary
在新分支开头注入旧分支的摘要" — the old branch's summary at the start of the new branch, made once).

Chat completions forward it as a user message of its own; the Messages API, whose roles
alternate, merges it into the new branch's first user turn, before the client's text (never into
an assistant turn: ctxproxy writes nothing in the assistant's name among the client's messages).
Either way it is sent once, just before the new branch's first message, with the same bytes on
the next request."""

from __future__ import annotations

import json
import re
from typing import Any

from ctxproxy.strategies.branch import BRANCH_HEADER, BRANCH_INTRO
from tests.protocols.conversation import SYSTEM, conversation

LAST = "Anything else to prepare for Saturday?"
EDITED = {"role": "user", "content": "Order 6, changed: the customer now wants rye rolls from the Porto shop instead."}


def orders(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"\b[Oo]rder (\d+)\b", text)}


def summary_at(parts: list[dict[str, Any]]) -> int:
    (at,) = [i for i, part in enumerate(parts) if BRANCH_HEADER in part["content"]]
    return at


async def test_an_edited_order_starts_a_branch_that_carries_the_old_one_once(protocol: Any) -> None:
    await protocol.start(strategy="cut_point")
    turns = conversation(10, last=LAST)
    plain = await protocol.send(SYSTEM, turns)
    assert plain.count("Branch-Summaries") == 0 and BRANCH_HEADER not in json.dumps(protocol.forwarded().body)
    await protocol.settle()

    edit = turns.index(conversation(10)[10])  # order 6's question
    branch = [*turns[:edit], EDITED]
    first = await protocol.send(SYSTEM, branch)
    sent = protocol.forwarded()
    protocol.check_valid(sent)
    assert first.count("Branch-Summaries") == 1
    assert json.dumps(sent.body).count(BRANCH_HEADER) == 1
    at = summary_at(sent.parts)
    assert sent.parts[at]["role"] == "user"
    assert sent.parts[at + 1 :] == [EDITED]  # right before the new branch's first message
    said = sent.parts[at]["content"].split(BRANCH_INTRO, 1)[1]
    assert said.strip() and orders(said) <= set(range(6, 11)) and "Porto" not in said
    await protocol.settle()

    later = await protocol.send(
        SYSTEM, [*branch, {"role": "assistant", "content": "Rye rolls it is."}, {"role": "user", "content": LAST}]
    )
    again = protocol.forwarded()
    protocol.check_valid(again)
    assert later.count("Branch-Summaries") == 1
    assert again.conversation[: len(sent.conversation)] == sent.conversation  # the same bytes
    assert json.dumps(again.body).count(BRANCH_HEADER) == 1

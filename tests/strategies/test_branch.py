"""The branch summary's plan, block kind and matching (``ctxproxy.strategies.branch``), pure.

Note 003: "Branch Summary 在新分支开头注入旧分支的摘要" — at the start of the new branch, once."""

from __future__ import annotations

from typing import Any

import pytest

from ctxproxy.session import PrefixChain
from ctxproxy.session.fork import Fork
from ctxproxy.session.lineage import Lineage
from ctxproxy.strategies.base import Block, Checkpoint
from ctxproxy.strategies.branch import (
    BRANCH_HEADER,
    BRANCH_INTRO,
    BRANCH_KIND,
    BranchBudget,
    applying,
    branch_checkpoint,
    handled,
    insertion_point,
    plan_branch_summary,
)
from ctxproxy.strategies.kinds import HISTORY, Held
from ctxproxy.strategies.paged.contents import ContentsEntry, encode_entries
from ctxproxy.strategies.registry import builtin_registry
from tests.strategies.factories import assistant, assistant_calls, system, tool, user

KINDS = builtin_registry().kinds
BUDGET = BranchBudget(max_tokens=400, min_tokens=30)
OLD = [system(), user("plan day 1"), assistant("day 1 planned"), user("plan day 2"), assistant("day 2 planned")]
NEW = [*OLD[:3], user("plan day 2 in Porto")]
TIP = Lineage.of(PrefixChain.of(OLD), len(OLD))


def exact(messages: list[dict[str, Any]], tokens: int = 20) -> Fork:
    return Fork(3, TIP, tuple(messages), tuple(tokens for _ in messages))


def count(text: str) -> int:
    return len(text.split())


def test_the_plan_puts_the_summary_before_the_new_branch_and_carries_the_abandoned_messages() -> None:
    plan = plan_branch_summary(NEW, exact(OLD[3:]), [], count, BUDGET, owner="o1")
    assert plan is not None
    assert (plan.start, plan.end, plan.block_kind, plan.max_tokens) == (3, 4, BRANCH_KIND, 400)
    assert plan.state["messages"] == OLD[3:] and plan.state["tip"] == TIP.to_json() and plan.state["owner"] == "o1"


def test_nothing_worth_keeping_makes_no_plan() -> None:
    assert plan_branch_summary(NEW, exact([user("plan day 2")]), [], count, BUDGET) is None  # no answer in it
    assert plan_branch_summary(NEW, exact(OLD[3:], tokens=10), [], count, BUDGET) is None  # 20 < 30 tokens
    off = BranchBudget(max_tokens=0, min_tokens=0)
    assert plan_branch_summary(NEW, exact(OLD[3:]), [], count, off) is None
    assert plan_branch_summary(NEW, Fork(3, TIP), [], count, BUDGET) is None  # nothing abandoned


def test_from_what_was_stored_the_held_texts_and_pages_are_carried() -> None:
    fork = Fork(3, TIP, left=Checkpoint(5, TIP.prefix, (), 1.0), seen=False)
    held = [Held("a summary of the old branch " * 5), Held("Page 4: lines", "4:abcd")]
    plan = plan_branch_summary(NEW, fork, held, count, BUDGET)
    assert plan is not None and plan.state["held"] == [[held[0].text, None], ["Page 4: lines", "4:abcd"]]
    assert plan_branch_summary(NEW, fork, [Held("short")], count, BUDGET) is None


def test_the_summary_never_separates_a_tool_result_from_its_call() -> None:
    messages = [system(), user("look it up"), assistant_calls("lookup"), tool("call_lookup", "new result"), user("ok")]
    assert insertion_point(messages, 3) == 2  # before the call, not between it and its result
    assert insertion_point(messages, 10) == 4  # a shorter resend: before its last message
    assert insertion_point(messages, 1) == 1


def test_the_kind_renders_its_own_message_and_the_registry_knows_it() -> None:
    branch = Checkpoint(4, "p", (Block(3, 3, "### Goal\n- Lisbon days", BRANCH_KIND),), 1.0)
    assert KINDS[BRANCH_KIND].executor is not None and BRANCH_KIND in KINDS
    assert KINDS.render(branch.blocks) == f"{BRANCH_HEADER}\n\n{BRANCH_INTRO}\n\n### Goal\n- Lisbon days"
    assert KINDS.of(branch.blocks).message_name == "branch_summary"


def test_what_a_stored_block_holds_from_a_point_on() -> None:
    rolling = Checkpoint(9, "p", (Block(1, 9, "### Goal\n- everything"),), 1.0)
    assert [h.text for h in KINDS.held_since(rolling, 5)] == ["### Goal\n- everything"]  # whole
    assert KINDS.held_since(rolling, 9) == []
    rounds = Checkpoint(9, "p", (Block(1, 5, "first", "rounds"), Block(5, 9, "second", "rounds")), 1.0)
    assert [h.text for h in KINDS.held_since(rounds, 5)] == ["second"]
    entries = [
        ContentsEntry(n, 2 * n - 1, 2 * n + 1, f"{n}:ab", f"User: day {n}", (f"line {n}",), 3) for n in (1, 2, 3)
    ]
    pages = Checkpoint(7, "p", (Block(1, 7, "## Contents Page", "contents"),), 1.0, state=encode_entries(entries))
    held = KINDS.held_since(pages, 3)
    assert [(h.text, h.page) for h in held] == [
        ("Page 2: User: day 2\nline 2", "2:ab"),
        ("Page 3: User: day 3\nline 3", "3:ab"),
    ]
    assert KINDS[HISTORY.name].held_since(Block(1, 3, "  "), {}, 1) == []


def branch_at(messages: list[dict[str, Any]], at: int, tip: Lineage, owner: str | None, created: float) -> Checkpoint:
    chain = PrefixChain.of(messages)
    state = {"tip": tip.to_json(), "owner": owner}
    return Checkpoint(
        at + 1, chain.prefix_hash(at + 1).hex(), (Block(at, at, f"s{created}", BRANCH_KIND),), created, state=state
    )


def test_a_request_gets_its_owners_summaries_of_branches_it_left_by_position() -> None:
    first = branch_at(NEW, 3, TIP, None, 1.0)
    newer = branch_at(NEW, 3, TIP, None, 2.0)
    later = [*NEW, assistant("Porto planned"), user("day 3 in Porto"), assistant("ok"), user("day 4")]
    deeper = branch_at(later, 6, Lineage(9, "f" * 32), None, 3.0)  # a later fork, from another branch
    chain = PrefixChain.of(later)
    assert applying([first, newer, deeper], chain, None) == [newer, deeper]  # one per position, the newest
    assert handled([newer, deeper], 6) and handled([newer], 3) and not handled([newer], 4)
    assert applying([first], chain, "someone") == []  # another owner's
    assert applying([first], PrefixChain.of(OLD + [user("back")]), None) == []  # it is on the old branch
    assert applying([first], PrefixChain.of(NEW[:3]), None) == []  # it does not repeat the start
    resent_old = branch_at(OLD[:4], 3, Lineage.of(PrefixChain.of(OLD), 5), None, 1.0)  # a shorter resend of OLD
    assert applying([resent_old], PrefixChain.of([*OLD, user("on")]), None) == []  # extends its own tip


def test_the_checkpoint_it_makes_covers_nothing_and_remembers_whose_branch_it_left() -> None:
    plan = plan_branch_summary(NEW, exact(OLD[3:]), [], count, BUDGET, owner="o1")
    assert plan is not None
    made = branch_checkpoint(plan, PrefixChain.of(NEW), " ### Goal\n- day 2 in Lisbon \n", "llm", 5.0)
    assert made.blocks == (Block(3, 3, "### Goal\n- day 2 in Lisbon", BRANCH_KIND),)
    assert (made.end, made.prefix_hash) == (4, PrefixChain.of(NEW).prefix_hash(4).hex())
    assert made.state == {"tip": TIP.to_json(), "owner": "o1"} and made.summarizer == "llm"
    assert Checkpoint.from_json(made.to_json()) == made
    with pytest.raises(ValueError):
        branch_checkpoint(plan, PrefixChain.of(NEW), "  \n", "extractive", 5.0)

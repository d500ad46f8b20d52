"""Branch summaries end to end (note 003, §4), over HTTP with the ``openai`` SDK and the fake upstream.

The note: "当用户跳到 session 树的另一个分支时，旧分支的工作上下文会丢失。Branch Summary 在新分支开头注入旧分支的摘要。"
(when the user jumps to another branch of the session tree, the old branch's working context is
lost; a branch summary injects the old branch's summary at the start of the new branch), made
"一次性生成" (once, never updated). A stateless client forks by editing an earlier message or by
resending a shorter history and going on differently.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ctxproxy.session import message_digest
from ctxproxy.strategies.branch import BRANCH_INTRO
from ctxproxy.tokens import TokenCounter
from tests.compaction.branching import (
    MODEL,
    SYSTEM,
    Client,
    Messages,
    Sent,
    ask,
    body_prefix,
    days,
    lisbon,
    porto,
    user_index,
)
from tests.conftest import MakeProxy, Proxy, Upstream

TENANT = """
[memory]
enabled = false  # branch summaries alone (memory is on by default for cut_point)
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "cut_point"
summarizer = "extractive"
"""
RULE = "Branch Summary 在新分支开头注入旧分支的摘要 (note 003)"


@pytest.fixture
async def proxy(make_proxy: MakeProxy) -> Proxy:
    return await make_proxy({"default": TENANT})


@pytest.fixture
async def client(proxy: Proxy, upstream: Upstream) -> AsyncIterator[Client]:
    made = Client(proxy, upstream)
    yield made
    await made.close()


async def twelve_days(client: Client) -> tuple[Messages, list[Sent]]:
    history: Messages = [SYSTEM]
    turns = await client.converse(history, lisbon(range(1, 13)))
    return history, turns


def counted(turn: Sent) -> int:
    """The forwarded prompt's tokens, counted as ctxproxy counts them."""
    messages = turn.messages
    return TokenCounter().count_messages(messages, [message_digest(m) for m in messages], MODEL)


# ------------------------------------------------------------------------------------------------


async def test_an_edited_earlier_message_starts_a_branch_that_carries_the_old_one_summarised_once(
    client: Client,
) -> None:
    """Branch Summary 在新分支开头注入旧分支的摘要; 可迭代更新: ❌ 一次性生成 (note 003).

    Twelve days planned in Lisbon; the client edits day 6 into Porto and goes on from there. The
    new branch's first request carries one branch summary, right before its first message, made
    from days 6-12 only (the abandoned part), and the next requests carry the very same bytes at
    the very same place."""
    history, turns = await twelve_days(client)
    assert all(not t.branches and t.announced == 0 for t in turns)  # no fork, no block
    edit = user_index(history, 6)
    branch: Messages = [*history[:edit]]
    played = await client.converse(branch, porto(range(6, 9)))

    first = played[0]
    assert len(first.branches) == 1 and first.announced == 1
    at, block = first.branches[0]
    assert at == edit  # at the start of the new branch: before its first message
    assert first.without_branches() == first.sent  # every client message forwarded, as sent
    assert block["role"] == "user" and "name" not in block  # among the client's messages: no assistant turn
    assert BRANCH_INTRO in block["content"]
    said = days(block["content"].split(BRANCH_INTRO, 1)[1])
    assert said and said <= set(range(6, 13))  # only what the abandoned branch held, from the fork on
    assert "Porto" not in block["content"]
    assert int(first.headers["X-Ctx-Tokens-After"]) == counted(first) > int(first.headers["X-Ctx-Tokens-Before"])
    # Within the budget (400 tokens by default), its header and intro aside.
    assert TokenCounter().count_text(block["content"].split(BRANCH_INTRO, 1)[1], MODEL) <= 400

    for previous, later in zip(played, played[1:], strict=False):
        assert later.branches == first.branches  # the same message at the same place, once
        assert later.announced == 1
        assert later.forwarded.body.startswith(body_prefix(previous))  # byte-stable prefix
        assert int(later.headers["X-Ctx-Tokens-After"]) == counted(later)


async def test_a_shorter_resend_summarises_what_came_after_it(client: Client) -> None:
    """Branch Summary 在新分支开头注入旧分支的摘要 (note 003): a client that resends the first
    eight days (the history up to day 8's question) and goes on from there gets what followed
    day 8's question — its answer and days 9-12 — summarised before that question."""
    history, _ = await twelve_days(client)
    cut = user_index(history, 8) + 1
    again = [*history[:cut]]
    resent = await client.send(again)
    assert len(resent.branches) == 1
    at, block = resent.branches[0]
    assert at == cut - 1 and resent.messages[at + 1] == history[cut - 1]  # before the resent question
    assert days(block["content"].split(BRANCH_INTRO, 1)[1]) <= set(range(8, 13))
    assert resent.without_branches() == again

    again.append({"role": "assistant", "content": "A different answer for day 8."})
    later = await client.send([*again, ask(9, "Porto")])
    assert later.branches == resent.branches


async def test_a_tiny_abandoned_part_gets_no_branch_summary(client: Client) -> None:
    """What the left branch held must be worth keeping: an edited last question (no answer of
    the model in the abandoned part) or a resend of the same request makes no branch summary."""
    history, turns = await twelve_days(client)
    last = turns[-1].sent
    edited = await client.send([*last[:-1], {"role": "user", "content": "Actually, only tell me about day 12's tram."}])
    assert not edited.branches and edited.announced == 0
    assert edited.messages == edited.sent
    same = await client.send(last)
    assert not same.branches and same.messages == last


async def test_a_branch_below_the_minimum_is_not_summarised(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """``branch_summary_min_tokens``: an abandoned part that holds fewer tokens is not worth a summary."""
    proxy = await make_proxy({"default": TENANT + "branch_summary_min_tokens = 100000\n"})
    client = Client(proxy, upstream)
    history, _ = await twelve_days(client)
    fork = await client.send([*history[: user_index(history, 6)], ask(6, "Porto")])
    await client.close()
    assert not fork.branches and fork.messages == fork.sent


async def test_going_back_to_the_old_branch_gets_the_new_one_summarised_never_its_own(client: Client) -> None:
    """Switching branches again injects the summary of the branch just left, at the fork point;
    the old branch never gets its own summary back."""
    history, _ = await twelve_days(client)
    edit = user_index(history, 6)
    branch = [*history[:edit]]
    await client.converse(branch, porto(range(6, 9)))
    back = await client.send([*history, ask(13)])
    assert len(back.branches) == 1
    at, block = back.branches[0]
    assert at == edit
    text = block["content"].split(BRANCH_INTRO, 1)[1]
    assert "Porto" in text and "Lisbon" not in text


async def test_strategy_none_adds_no_branch_summary(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """``none`` promises the client's own bytes: a fork is forwarded as sent (a strategy trait)."""
    proxy = await make_proxy({"default": TENANT.replace('"cut_point"', '"none"')})
    client = Client(proxy, upstream)
    history, _ = await twelve_days(client)
    fork = await client.send([*history[: user_index(history, 6)], ask(6, "Porto")])
    await client.close()
    assert not fork.branches and fork.messages == fork.sent


async def test_a_budget_of_zero_turns_branch_summaries_off(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": TENANT + "branch_summary_max_tokens = 0\n"})
    client = Client(proxy, upstream)
    history, _ = await twelve_days(client)
    fork = await client.send([*history[: user_index(history, 6)], ask(6, "Porto")])
    await client.close()
    assert not fork.branches and fork.messages == fork.sent


async def test_background_mode_gives_it_to_the_next_request_of_the_new_branch(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """``mode = "background"``: the fork request goes on at once; the summary is made off the
    request path, and the following requests of the new branch carry it."""
    proxy = await make_proxy({"default": TENANT.replace('"extractive"', '"extractive"\nmode = "background"')})
    client = Client(proxy, upstream)
    history, _ = await twelve_days(client)
    branch = [*history[: user_index(history, 6)]]
    first, second, third = await client.converse(branch, porto(range(6, 9)))
    await client.close()
    assert not first.branches and first.messages == first.sent
    assert len(second.branches) == 1 and second.branches[0][0] == user_index(history, 6)
    assert third.branches == second.branches


@pytest.mark.parametrize("second", ["bob", "alice"])
async def test_a_branch_summary_is_its_owners_only(proxy: Proxy, upstream: Upstream, second: str) -> None:
    """Two users who open alike share a session key; bob's conversation is never alice's
    "earlier branch". The same opening by alice herself is her own fork (she resent her first
    message and went on differently), and gets one."""
    opening = [{"role": "user", "content": "Hi there!"}, {"role": "user", "content": "Let us plan a city trip."}]
    client = Client(proxy, upstream)
    alice: Messages = [SYSTEM]
    for question in [*opening, *lisbon(range(1, 7))]:
        alice.append(question)
        alice.append({"role": "assistant", "content": (await client.send(alice, user="alice")).answer})
    other: Messages = [SYSTEM]
    seen = []
    for question in [*opening, *porto(range(1, 4))]:
        other.append(question)
        seen.append(await client.send(other, user=second))
        other.append({"role": "assistant", "content": seen[-1].answer})
    await client.close()
    assert seen[0].headers["X-Ctx-Session"] == seen[-1].headers["X-Ctx-Session"]  # one session key
    forked = [turn for turn in seen if turn.branches]
    if second == "bob":
        assert forked == [] and all(t.messages == t.sent for t in seen)
    else:
        # Resending her opening went back to its start: her first plan is summarised there, once.
        assert forked == seen and all(t.branches == seen[0].branches for t in seen)
        assert len(seen[0].branches) == 1 and "Lisbon" in seen[0].branches[0][1]["content"]


async def test_strangers_with_the_same_opening_never_see_each_others_branch(client: Client) -> None:
    """Without an identity, a fork must share two user messages with the branch it left: two
    strangers who both say "Hi there!" (and get the same answer) share less."""
    first: Messages = [SYSTEM]
    await client.converse(first, [{"role": "user", "content": "Hi there!"}, *lisbon(range(1, 7))])
    own = await client.send([*first[: user_index(first, 5)], ask(4, "Porto")])
    assert len(own.branches) == 1  # the first conversation's own fork
    stranger: Messages = [SYSTEM]
    turns = await client.converse(stranger, [{"role": "user", "content": "Hi there!"}, *porto(range(1, 4))])
    assert turns[0].headers["X-Ctx-Session"] == own.headers["X-Ctx-Session"]
    assert all(not t.branches and t.messages == t.sent for t in turns)


async def test_a_compaction_past_the_fork_point_keeps_the_branch_summary_right_after_it(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """The branch summary is never summarised away: once the new branch's summary covers the fork
    point, the branch summary follows that summary, with the same bytes."""
    small = (
        "default_context_window = 3000\n"
        + TENANT
        + "[compaction.cut_point]\nreserve_tokens = 500\nkeep_recent_tokens = 800\n"
    )
    proxy = await make_proxy({"default": small})
    client = Client(proxy, upstream)
    history, _ = await twelve_days(client)
    edit = user_index(history, 6)
    branch = [*history[:edit]]
    played = await client.converse(branch, porto(range(6, 30)))
    await client.close()
    block = played[0].branches[0][1]
    covering = 0
    for turn in played:
        assert [m for _, m in turn.branches] == [block]
        summarized = int(turn.headers.get("X-Ctx-Summarized", "0"))
        at = turn.branches[0][0]
        if summarized > edit:
            covering += 1
            assert at == 2 and turn.messages[1]["name"] == "context_summary"
            assert turn.messages[3:] == turn.sent[summarized:]
        else:
            assert turn.messages[at + 1] == turn.sent[edit]
        assert int(turn.headers["X-Ctx-Tokens-After"]) == counted(turn)
    assert covering > 0

"""Where a branch summary comes from, and what happens when making it fails (note 003, §4).

"旧分支的工作上下文会丢失。Branch Summary 在新分支开头注入旧分支的摘要" — the abandoned branch is
summarised once ("一次性生成") with the tenant's summariser. What is summarised: the abandoned
messages themselves when this process saw that branch (the previous request it served); after a
restart, or on another replica, only what the Store kept of it — the summary of its newest
checkpoint, whole, or for ``paged`` its archived pages, read back raw. A failing summariser never
costs the request.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog

from ctxproxy.compaction.checkpoints import decode_index
from ctxproxy.services import STORE
from ctxproxy.session import PrefixChain, session_key
from ctxproxy.store.keys import checkpoints_key
from ctxproxy.strategies.base import Checkpoint
from ctxproxy.strategies.branch import BRANCH_INTRO
from ctxproxy.strategies.paged.contents import decode_entries
from ctxproxy.summarize.base import SummaryResult, SummaryTask
from ctxproxy.summarize.extractive import ExtractiveSummarizer
from ctxproxy.summarize.prompts import SYSTEM as SUMMARY_SYSTEM
from tests.compaction.branching import SYSTEM, Client, Messages, ask, days, lisbon, porto, user_index
from tests.compaction.test_http_visibility import TENANT as COMPACTING  # cut_point in a 3000-token window
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.fakes.upstream import Recorded, openai_error
from tests.recall.paged import PAGED_TENANT

LLM_TENANT = """
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "cut_point"
summarizer = "llm"
"""
SCRIPTED = "### Goal\n- plan days 6 to 12 in Lisbon\n\n### Decisions\n- tram line 9 first"
SUMMARY_OPENING = SUMMARY_SYSTEM[:40]


def summary_calls(upstream: Upstream) -> list[Recorded]:
    return [r for r in upstream.fake.chat_requests() if r.json()["messages"][0]["content"].startswith(SUMMARY_OPENING)]


def prompt_of(call: Recorded) -> str:
    return str(call.json()["messages"][1]["content"])


async def play(proxy: Proxy, upstream: Upstream, asks: list[dict[str, Any]]) -> Messages:
    client = Client(proxy, upstream)
    history: Messages = [SYSTEM]
    await client.converse(history, asks)
    await client.close()
    return history


async def stored_index(proxy: Proxy, history: Messages) -> list[Checkpoint]:
    key = session_key("default", history, PrefixChain.of(history))
    return decode_index(await proxy.server.app[STORE].get(checkpoints_key(key)))


async def behind_newest(proxy: Proxy, history: Messages) -> tuple[int, Checkpoint]:
    """A day whose question the newest stored checkpoint covers, after the end of the checkpoint
    it was made over: editing it forks behind what was stored, on that checkpoint's chain."""
    newest = max(await stored_index(proxy, history), key=lambda c: c.created_at)
    assert newest.base is not None
    questions = [i for i, m in enumerate(history) if m["role"] == "user" and newest.base.length < i < newest.end]
    assert questions
    return history[questions[-1]]["content"], newest


async def fork(proxy: Proxy, upstream: Upstream, messages: Messages) -> Any:
    client = Client(proxy, upstream)
    sent = await client.send(messages)
    await client.close()
    return sent


# ------------------------------------------------------------------------------------------------


async def test_the_llm_summarises_the_abandoned_messages_once(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """一次性生成: one summary call per fork, with the branch's own messages from the fork point on
    (days 6-12, never the shared days 1-5), its answer forwarded as the branch summary; the
    following requests of the new branch reuse it without another call."""
    proxy = await make_proxy({"default": LLM_TENANT})
    history = await play(proxy, upstream, lisbon(range(1, 13)))
    assert summary_calls(upstream) == []
    upstream.fake.reply_json(SCRIPTED)  # the summary call comes first, then the forwarded request
    client = Client(proxy, upstream)
    branch = [*history[: user_index(history, 6)]]
    played = await client.converse(branch, porto(range(6, 9)))
    await client.close()

    calls = summary_calls(upstream)
    assert len(calls) == 1
    prompt = prompt_of(calls[0])
    assert "<abandoned-branch>" in prompt and "went back" in prompt
    assert days(prompt) == set(range(6, 13)) and "Porto" not in prompt
    for day in range(6, 13):
        assert ask(day)["content"] in prompt  # verbatim
    block = played[0].branches[0][1]["content"]
    assert block.split(BRANCH_INTRO, 1)[1].strip() == SCRIPTED
    assert all(t.branches == played[0].branches for t in played)


async def test_a_failing_llm_summariser_falls_back_and_the_request_is_answered(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """A failing summariser never fails the request: the upstream refuses the summary call, the
    extractive summariser writes the branch summary, and every client message is forwarded."""
    proxy = await make_proxy({"default": LLM_TENANT})
    history = await play(proxy, upstream, lisbon(range(1, 13)))
    upstream.fake.reply_error(500, openai_error("The server had an error", type="server_error"))
    with structlog.testing.capture_logs() as logs:
        sent = await fork(proxy, upstream, [*history[: user_index(history, 6)], ask(6, "Porto")])
    assert sent.answer == "echo: " + ask(6, "Porto")["content"]
    assert sent.without_branches() == sent.sent
    assert len(sent.branches) == 1
    assert days(sent.branches[0][1]["content"].split(BRANCH_INTRO, 1)[1]) <= set(range(6, 13))
    assert [e["reason"] for e in logs if e["event"] == "summary.llm_fallback"] == ["status"]
    made = [e for e in logs if e["event"] == "branch_summary"]
    assert len(made) == 1 and made[0]["summarizer"] == "extractive" and made[0]["source"] == "messages"


async def test_a_summariser_that_breaks_costs_the_branch_summary_only(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """Nothing is lost when the branch summary cannot be made: the request is answered with
    every client message, the failure is logged, and nothing half made is stored."""
    proxy = await make_proxy({"default": LLM_TENANT.replace('"llm"', '"extractive"')})
    history = await play(proxy, upstream, lisbon(range(1, 13)))
    original = ExtractiveSummarizer.summarize

    async def broken(self: ExtractiveSummarizer, task: SummaryTask) -> SummaryResult:
        if task.flavour == "branch":
            raise RuntimeError("summariser bug")
        return await original(self, task)

    with pytest.MonkeyPatch.context() as patch, structlog.testing.capture_logs() as logs:
        patch.setattr(ExtractiveSummarizer, "summarize", broken)
        sent = await fork(proxy, upstream, [*history[: user_index(history, 6)], ask(6, "Porto")])
    assert sent.messages == sent.sent and not sent.branches
    assert sent.answer == "echo: " + ask(6, "Porto")["content"]
    assert [e["event"] for e in logs if e["event"].startswith("branch_summary")] == ["branch_summary.failed"]
    key = session_key("default", history, PrefixChain.of(history))
    assert decode_index(await proxy.server.app[STORE].get(checkpoints_key(key)), "branches") == []


async def test_after_a_restart_the_summary_is_made_from_the_stored_checkpoint(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """A process that never saw the abandoned branch has only what the Store kept of it: the
    newest checkpoint's summary (a rolling summary covers the shared start too, and is used
    whole). The raw messages after that checkpoint were never stored and are not summarised."""
    first = await make_proxy({"default": COMPACTING})
    history = await play(first, upstream, lisbon(range(1, 41)))
    question, newest = await behind_newest(first, history)
    (day,) = days(question)
    edit = user_index(history, day)

    restarted = await make_proxy({"default": LLM_TENANT})  # same store, nothing seen in memory
    upstream.fake.reply_json(SCRIPTED)
    with structlog.testing.capture_logs() as logs:
        sent = await fork(restarted, upstream, [*history[:edit], ask(day, "Porto")])
    assert len(sent.branches) == 1 and sent.branches[0][1]["content"].endswith(SCRIPTED)
    prompt = prompt_of(summary_calls(upstream)[-1])
    assert newest.blocks[0].text.strip()[:300] in prompt  # the stored summary is what was used
    raw_only = set(range(1, 41)) - days(newest.blocks[0].text)
    assert raw_only and not days(prompt) & raw_only  # never a raw message of the abandoned branch
    assert [e["source"] for e in logs if e["event"] == "branch_summary"] == ["stored"]


async def test_after_a_restart_paged_reads_the_abandoned_pages_back_raw(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """For ``paged`` the Store kept the abandoned pages raw: they are read back and summarised,
    not only their Contents Page lines."""
    detail = "The caterer's code word for the late delivery is KINGFISHER."
    asks = lisbon(range(1, 10))
    asks[4] = {"role": "user", "content": asks[4]["content"] + " " + detail}
    first = await make_proxy({"default": PAGED_TENANT})
    history = await play(first, upstream, asks)
    newest = max(await stored_index(first, history), key=lambda c: c.created_at)
    entries = decode_entries(newest.state)
    assert any(e.page == 5 for e in entries) and "KINGFISHER" not in str(newest.to_json())  # only raw

    restarted = await make_proxy({"default": LLM_TENANT})
    upstream.fake.reply_json(SCRIPTED)
    sent = await fork(restarted, upstream, [*history[: user_index(history, 4)], ask(4, "Porto")])
    assert len(sent.branches) == 1
    prompt = prompt_of(summary_calls(upstream)[-1])
    assert detail in prompt  # page 5, read back raw from the Store
    assert days(prompt) and min(days(prompt)) >= 4  # the pages from the fork point on


async def test_two_replicas_make_one_summary_for_one_fork(
    make_proxy: MakeProxy, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Made once per fork across replicas: two replicas that both see the same fork (neither saw
    the branch it left) make one summary under the session's lease, and both forward it."""
    served = await make_proxy({"default": COMPACTING})
    history = await play(served, upstream, lisbon(range(1, 41)))
    replicas = [await make_proxy({"default": COMPACTING}) for _ in range(2)]
    made: list[SummaryTask] = []
    original = ExtractiveSummarizer.summarize

    async def slow(self: ExtractiveSummarizer, task: SummaryTask) -> SummaryResult:
        if task.flavour == "branch":
            made.append(task)
            await asyncio.sleep(0.3)  # long enough for the other replica to reach the lease
        return await original(self, task)

    monkeypatch.setattr(ExtractiveSummarizer, "summarize", slow)
    question, _ = await behind_newest(served, history)
    (day,) = days(question)
    branch = [*history[: user_index(history, day)], ask(day, "Porto")]
    sent = await asyncio.gather(*(fork(replica, upstream, branch) for replica in replicas))
    assert len(made) == 1
    assert len(sent[0].branches) == len(sent[1].branches) == 1
    assert sent[0].branches[0][1] == sent[1].branches[0][1]

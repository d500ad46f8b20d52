"""Single-flight compaction and the background mode, end to end over HTTP.

The extractive summariser is made slow (0.5 s a call) so that concurrent requests really overlap
the compaction that holds the session's lock. Compactions are counted three ways: the
summariser's calls, the ``compaction`` log events and the checkpoints in the session's index.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest
import structlog
from multidict import CIMultiDict

from ctxproxy.compaction.checkpoints import decode_index
from ctxproxy.services import STORE, TASKS
from ctxproxy.session import SessionKey
from ctxproxy.store.keys import checkpoints_key, compaction_pending_key
from ctxproxy.strategies.base import Checkpoint
from ctxproxy.summarize.base import SummaryResult, SummaryTask
from ctxproxy.summarize.extractive import ExtractiveSummarizer
from tests.conftest import MakeProxy, Proxy, Upstream

MODEL = "ctx-test-model"  # in no built-in table: the tenant's default_context_window applies
SYSTEM = {"role": "system", "content": "You are a helpful travel agent."}
SLOW = 0.5  # seconds per summary
BURST = 6
TENANT = """
default_context_window = 3000
[upstream]
base_url = "{{upstream}}"
[compaction]
strategy = "cut_point"
mode = "{mode}"
summarizer = "extractive"
summary_max_tokens = 200
[compaction.cut_point]
reserve_tokens = {reserve}
keep_recent_tokens = {keep}
[memory]
enabled = false  # compaction alone (memory is on by default for cut_point)
"""


def history(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [SYSTEM]
    for n in range(1, turns + 1):
        text = (
            f"Leg {n}: the train from city {n} leaves at {n % 12 + 6}:10 from platform {n}. We decided to book "
            f"seat {n}A. The hotel in city {n} must allow a late check-in after 22:00."
        )
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "echo: " + text}]
    messages.append({"role": "user", "content": f"Now plan leg {turns + 1}, please."})
    return messages


@pytest.fixture
def summaries(monkeypatch: pytest.MonkeyPatch) -> list[SummaryTask]:
    """Slow down the extractive summariser and record every call."""
    calls: list[SummaryTask] = []
    original = ExtractiveSummarizer.summarize

    async def slow(self: ExtractiveSummarizer, task: SummaryTask) -> SummaryResult:
        calls.append(task)
        await asyncio.sleep(SLOW)
        return await original(self, task)

    monkeypatch.setattr(ExtractiveSummarizer, "summarize", slow)
    return calls


async def post(http: aiohttp.ClientSession, proxy: Proxy, messages: list[dict[str, Any]]) -> Mapping[str, str]:
    async with http.post(proxy.url("/v1/chat/completions"), json={"model": MODEL, "messages": messages}) as resp:
        assert resp.status == 200, await resp.text()
        await resp.read()
        return CIMultiDict(resp.headers)


async def checkpoints(proxy: Proxy, session: str) -> list[Checkpoint]:
    return decode_index(await proxy.server.app[STORE].get(checkpoints_key(SessionKey("default", session, "derived"))))


def compaction_events(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "compaction"]


# ------------------------------------------------------------------------------------------------


async def test_a_concurrent_burst_that_fits_compacts_once_and_the_rest_go_on(
    make_proxy: MakeProxy, upstream: Upstream, summaries: list[SummaryTask]
) -> None:
    proxy = await make_proxy({"default": TENANT.format(mode="inline", reserve=1000, keep=600)})
    messages = history(22)  # over window − reserve_tokens (2000), under the window (3000)
    with structlog.testing.capture_logs() as logs:
        async with aiohttp.ClientSession() as http:
            answers = await asyncio.gather(*(post(http, proxy, messages) for _ in range(BURST)))
            burst_events = len(compaction_events(logs))
            await proxy.server.app[TASKS].drain(5)
            later = await post(http, proxy, messages)
    before = int(answers[0]["X-Ctx-Tokens-Before"])
    assert 2000 < before <= 3000
    assert burst_events == 1
    assert sum(a.get("X-Ctx-Compacted") == "1" for a in answers) == 1
    # The others did not wait for the lock: they went on with the newest checkpoint (none yet).
    assert sum("X-Ctx-Summarized" not in a for a in answers) == BURST - 1
    events = compaction_events(logs)
    assert 1 <= len(events) <= 2  # the pending re-run compacts at most once more
    assert len(summaries) == len(events)
    session = answers[0]["X-Ctx-Session"]
    assert {a["X-Ctx-Session"] for a in answers} == {session}
    assert len(await checkpoints(proxy, session)) == len(events)
    assert await proxy.server.app[STORE].get(compaction_pending_key(SessionKey("default", session, "derived"))) is None
    # Afterwards the session's checkpoint is simply used.
    assert later["X-Ctx-Summarized"] == str(max(e["range"][1] for e in events))
    assert "X-Ctx-Compacted" not in later


async def test_a_concurrent_burst_that_does_not_fit_waits_for_the_one_compaction(
    make_proxy: MakeProxy, upstream: Upstream, summaries: list[SummaryTask]
) -> None:
    proxy = await make_proxy({"default": TENANT.format(mode="inline", reserve=1000, keep=600)})
    messages = history(32)  # over the window: nobody may go on without a compaction
    with structlog.testing.capture_logs() as logs:
        async with aiohttp.ClientSession() as http:
            answers = await asyncio.gather(*(post(http, proxy, messages) for _ in range(BURST)))
            burst_events = len(compaction_events(logs))
            await proxy.server.app[TASKS].drain(5)
    assert int(answers[0]["X-Ctx-Tokens-Before"]) > 3000
    assert burst_events == 1
    assert len(compaction_events(logs)) <= 2
    assert len(summaries) == len(compaction_events(logs))
    # Every request was forwarded with the one new checkpoint ...
    ends = {a["X-Ctx-Summarized"] for a in answers}
    assert ends == {str(compaction_events(logs)[0]["range"][1])}
    assert all(int(a["X-Ctx-Tokens-After"]) <= 3000 for a in answers)
    requests = upstream.fake.chat_requests()
    assert len(requests) == BURST
    assert len({r.body for r in requests}) == 1  # ... so all forwarded the same bytes


async def test_only_the_request_that_made_the_checkpoint_says_compacted(
    make_proxy: MakeProxy, upstream: Upstream, summaries: list[SummaryTask]
) -> None:
    # Regression: requests that waited for another's compaction also answered X-Ctx-Compacted: 1.
    proxy = await make_proxy({"default": TENANT.format(mode="inline", reserve=1000, keep=600)})
    messages = history(32)
    with structlog.testing.capture_logs() as logs:
        async with aiohttp.ClientSession() as http:
            answers = await asyncio.gather(*(post(http, proxy, messages) for _ in range(BURST)))
            await proxy.server.app[TASKS].drain(5)
    assert len(compaction_events(logs)) == 1
    assert sum(a.get("X-Ctx-Compacted") == "1" for a in answers) == 1


async def test_background_mode_forwards_at_once_and_the_next_request_uses_the_new_checkpoint(
    make_proxy: MakeProxy, upstream: Upstream, summaries: list[SummaryTask]
) -> None:
    proxy = await make_proxy({"default": TENANT.format(mode="background", reserve=1000, keep=600)})
    messages = history(22)  # triggers, fits
    with structlog.testing.capture_logs() as logs:
        async with aiohttp.ClientSession() as http:
            first = await post(http, proxy, messages)
            session = first["X-Ctx-Session"]
            # Answered while the summary is still being written: nothing stored yet.
            assert await checkpoints(proxy, session) == []
            assert compaction_events(logs) == []
            await proxy.server.app[TASKS].drain(5)
            [made] = await checkpoints(proxy, session)
            assert len(summaries) == 1
            messages += [{"role": "assistant", "content": "echo: go on"}, {"role": "user", "content": "And then?"}]
            second = await post(http, proxy, messages)
    assert int(first["X-Ctx-Tokens-Before"]) > 2000  # it did trigger
    assert "X-Ctx-Compacted" not in first and "X-Ctx-Summarized" not in first
    assert first["X-Ctx-Tokens-After"] == first["X-Ctx-Tokens-Before"]
    forwarded = upstream.fake.chat_requests()
    assert forwarded[0].json()["messages"] == messages[:-2]  # forwarded as the client sent it
    [event] = compaction_events(logs)
    assert event["range"][1] == made.end
    assert second["X-Ctx-Summarized"] == str(made.end)
    assert "X-Ctx-Compacted" not in second
    sent = forwarded[1].json()["messages"]
    assert sent[1]["name"] == "context_summary" and sent[1]["content"].startswith("## Context Summary\n")
    assert sent[2:] == messages[made.end :]


async def test_background_mode_compacts_inline_when_the_request_would_not_fit(
    make_proxy: MakeProxy, upstream: Upstream, summaries: list[SummaryTask]
) -> None:
    proxy = await make_proxy({"default": TENANT.format(mode="background", reserve=1000, keep=600)})
    messages = history(32)
    async with aiohttp.ClientSession() as http:
        answer = await post(http, proxy, messages)
    assert int(answer["X-Ctx-Tokens-Before"]) > 3000
    assert answer.get("X-Ctx-Compacted") == "1"
    end = int(answer["X-Ctx-Summarized"])
    assert int(answer["X-Ctx-Tokens-After"]) <= 3000
    [made] = await checkpoints(proxy, answer["X-Ctx-Session"])
    assert made.end == end
    sent = upstream.fake.chat_requests()[0].json()["messages"]
    assert sent[2:] == messages[end:]


async def test_inline_mode_compacts_the_request_right_after_a_compaction(
    make_proxy: MakeProxy, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: the pending-request check that follows a compaction took the session's lock even
    # with nothing pending, so the session's next request found it taken and went on uncompacted.
    proxy = await make_proxy({"default": TENANT.format(mode="inline", reserve=1000, keep=600)})
    store = proxy.server.app[STORE]
    read = store.get

    async def slower_pending_reads(key: str) -> Any:
        # A store a network hop away: reads take a moment. Only the pending marker is slowed,
        # so nothing on the request path changes; it makes the timing below deterministic.
        if ":pending:" in key:
            await asyncio.sleep(0.3)
        return await read(key)

    monkeypatch.setattr(store, "get", slower_pending_reads)
    async with aiohttp.ClientSession() as http:
        first = await post(http, proxy, history(22))
        assert first.get("X-Ctx-Compacted") == "1"
        # The same conversation, much further on: needs a new compaction, still fits the window.
        second = await post(http, proxy, history(36))
        await proxy.server.app[TASKS].drain(5)
    assert 2000 < int(second["X-Ctx-Tokens-Before"]) and "X-Ctx-Summarized" in second
    assert second.get("X-Ctx-Compacted") == "1", dict(second)


async def test_a_pending_request_is_re_planned_once_after_the_running_compaction(
    make_proxy: MakeProxy, upstream: Upstream, summaries: list[SummaryTask]
) -> None:
    # Compacts past 1500 tokens and keeps little, so the longer request still needs a compaction
    # after the shorter one's.
    proxy = await make_proxy({"default": TENANT.format(mode="inline", reserve=1500, keep=300)})
    short, longer = history(15), history(27)  # the same conversation; the second one further on
    with structlog.testing.capture_logs() as logs:
        async with aiohttp.ClientSession() as http:
            first = asyncio.create_task(post(http, proxy, short))
            while not summaries:  # the first request holds the lock and is summarising
                await asyncio.sleep(0.01)
            second = await post(http, proxy, longer)  # finds the lock taken: pending, goes on as it is
            first_answer = await first
            await proxy.server.app[TASKS].drain(5)
            longer += [{"role": "assistant", "content": "echo: ok"}, {"role": "user", "content": "Next?"}]
            third = await post(http, proxy, longer)
    assert first_answer.get("X-Ctx-Compacted") == "1"
    assert 1500 < int(first_answer["X-Ctx-Tokens-Before"]) < int(second["X-Ctx-Tokens-Before"]) <= 3000
    assert "X-Ctx-Compacted" not in second and "X-Ctx-Summarized" not in second
    events = compaction_events(logs)
    assert len(events) == 2  # the holder's, then the pending request's re-run
    assert events[1]["range"][0] == events[0]["range"][1]  # the re-run continued from the new checkpoint
    assert third["X-Ctx-Summarized"] == str(events[1]["range"][1]) and "X-Ctx-Compacted" not in third


async def test_different_sessions_compact_concurrently(
    make_proxy: MakeProxy, upstream: Upstream, summaries: list[SummaryTask]
) -> None:
    proxy = await make_proxy({"default": TENANT.format(mode="inline", reserve=1000, keep=600)})
    conversations = []
    for n in range(3):
        messages = history(22)
        messages[1] = {**messages[1], "content": f"Trip {n}. " + messages[1]["content"]}  # another first message
        conversations.append(messages)
    async with aiohttp.ClientSession() as http:
        answers = await asyncio.gather(*(post(http, proxy, m) for m in conversations))
    assert len({a["X-Ctx-Session"] for a in answers}) == 3
    assert all(a.get("X-Ctx-Compacted") == "1" for a in answers)  # no session waited on another's lock
    assert len(summaries) == 3


async def test_a_client_that_goes_away_does_not_waste_the_summary(
    make_proxy: MakeProxy, upstream: Upstream, summaries: list[SummaryTask]
) -> None:
    proxy = await make_proxy({"default": TENANT.format(mode="inline", reserve=1000, keep=600)})
    messages = history(22)
    async with aiohttp.ClientSession() as http:
        request = asyncio.create_task(post(http, proxy, messages))
        while not summaries:
            await asyncio.sleep(0.01)
        request.cancel()  # the client disconnects while the summary is being written
        with pytest.raises(asyncio.CancelledError):
            await request
        await asyncio.sleep(SLOW + 0.2)
        await proxy.server.app[TASKS].drain(5)
        again = await post(http, proxy, messages)
    assert upstream.fake.chat_requests()[0].json()["messages"][1]["name"] == "context_summary"
    assert len(upstream.fake.chat_requests()) == 1  # the abandoned request was never forwarded
    assert "X-Ctx-Compacted" not in again and "X-Ctx-Summarized" in again  # the summary was kept
    assert len(summaries) == 1


async def test_a_concurrent_burst_in_background_mode_forwards_at_once_and_compacts_once(
    make_proxy: MakeProxy, upstream: Upstream, summaries: list[SummaryTask]
) -> None:
    proxy = await make_proxy({"default": TENANT.format(mode="background", reserve=1000, keep=600)})
    messages = history(22)
    with structlog.testing.capture_logs() as logs:
        async with aiohttp.ClientSession() as http:
            answers = await asyncio.gather(*(post(http, proxy, messages) for _ in range(BURST)))
            assert compaction_events(logs) == []  # all answered before the summary was done
            await proxy.server.app[TASKS].drain(5)
    assert all("X-Ctx-Compacted" not in a and "X-Ctx-Summarized" not in a for a in answers)
    assert len(compaction_events(logs)) == 1
    assert len(summaries) == 1

"""Faults around compaction lose nothing: summariser timeouts and failures, upstream resets and
cut streams, a briefly locked store and clients that leave. Every request ends with an answer or
an OpenAI-shaped error, the stored checkpoints stay true to the conversation, and a compaction
that was started is finished and kept.

The fake upstream serves its script FIFO to every chat request, the summariser's own calls
included. To script summary calls and user calls independently, ``Router`` takes over the fake's
choice of behaviour (``FakeUpstream._take_behaviour``) and answers each chat request from one of
two queues, told apart by the summariser's system prompt. The queued behaviours are the fake's own
(``reply_delay``, ``reply_stream(cut_after=...)``, ``reply_reset`` ...), made by its public
``reply_*`` methods and taken back off its queue at once.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest
import structlog
from multidict import CIMultiDict

from ctxproxy.compaction.checkpoints import decode_index
from ctxproxy.services import STORE, TASKS
from ctxproxy.session import PrefixChain, SessionKey
from ctxproxy.store import DiskLock
from ctxproxy.store.keys import checkpoints_key
from ctxproxy.strategies.base import Checkpoint
from ctxproxy.strategies.boundaries import leading_system_count
from ctxproxy.summarize.base import SummaryResult, SummaryTask
from ctxproxy.summarize.extractive import ExtractiveSummarizer
from ctxproxy.summarize.prompts import system_prompt
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.fakes.upstream import CHAT_PATH, FakeUpstream, openai_error

MODEL = "ctx-test-model"  # in no built-in table: the tenant's default_context_window applies
SYSTEM = {"role": "system", "content": "You are a helpful travel agent."}
SUMMARY_MAX_TOKENS = 200
GOOD_SUMMARY = "### Goal\n- plan the rail trip\n\n### Key facts\n- seats are booked per leg"
SLOW = 0.5  # seconds per summary when the summariser is slowed down
DEADLINE = 10.0  # no request may take longer than this: a hang is a failure
HOLD = 0.3  # seconds another connection holds the store's SQLite write lock
OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in "
        "9120 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
CUT_POINT = """
default_context_window = 3000
[upstream]
base_url = "{{upstream}}"
read_timeout = 1
[compaction]
strategy = "cut_point"
mode = "{mode}"
summarizer = "{summarizer}"
summary_timeout = {timeout}
summary_max_tokens = 200
[compaction.cut_point]
reserve_tokens = 500
keep_recent_tokens = 800
[memory]
enabled = false  # compaction alone (memory is on by default for cut_point)
"""
NONE_LLM = """
default_context_window = 100000
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "none"
summarizer = "llm"
summary_timeout = 0.5
summary_max_tokens = 200
"""


def cut_point(mode: str = "inline", summarizer: str = "llm", timeout: float = 0.5) -> str:
    return CUT_POINT.format(mode=mode, summarizer=summarizer, timeout=timeout)


def leg(n: int) -> str:
    return (
        f"Leg {n}: the train from city {n} leaves at {n % 12 + 6}:10 from platform {n}. We decided to book "
        f"seat {n}A. The hotel in city {n} must allow a late check-in after 22:00."
    )


def conversation(turns: int) -> list[dict[str, Any]]:
    """System, then user/assistant pairs; the assistant says what the fake's echo model says."""
    messages: list[dict[str, Any]] = [SYSTEM]
    for n in range(1, turns + 1):
        messages += [{"role": "user", "content": leg(n)}, {"role": "assistant", "content": "echo: " + leg(n)}]
    return messages


def turn(conv: list[dict[str, Any]], t: int) -> list[dict[str, Any]]:
    """The request of turn ``t``: everything before user message ``t``, and it."""
    return conv[: 2 * t]


def history(turns: int, words: int = 60) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful planner."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Question {i}: " + "tell me about the lake trip " * (words // 6)})
        messages.append(
            {"role": "assistant", "content": f"Answer {i}: " + "we went to the lake on Sunday " * (words // 6)}
        )
    messages.append({"role": "user", "content": "What did we decide?"})
    return messages


def is_summary_call(payload: Mapping[str, Any]) -> bool:
    messages = payload.get("messages") or []
    return bool(messages) and messages[0].get("content") == system_prompt(SUMMARY_MAX_TOKENS)


class Router:
    """Answers summary calls and user calls of the fake from two separate queues (FIFO each).

    An empty summary queue answers with a well-formed summary; an empty user queue with the
    fake's default (the echo model)."""

    def __init__(self, fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fake = fake
        self._take = fake._take_behaviour
        self.summary: deque[Any] = deque()
        self.user: deque[Any] = deque()
        self.summary_calls = 0
        self.user_calls = 0
        monkeypatch.setattr(fake, "_take_behaviour", self._choose)

    def make(self, script: Callable[[FakeUpstream], None]) -> Any:
        script(self.fake)
        behaviour = self._take(CHAT_PATH)
        assert behaviour is not None
        return behaviour

    def clear(self) -> None:
        self.summary.clear()
        self.user.clear()

    def _choose(self, path: str) -> Any:
        return self._dispatch if path == CHAT_PATH else self._take(path)

    async def _dispatch(self, ctx: Any) -> Any:
        if is_summary_call(ctx.payload()):
            self.summary_calls += 1
            behaviour = self.summary.popleft() if self.summary else self.make(lambda f: f.reply_json(GOOD_SUMMARY))
        else:
            self.user_calls += 1
            behaviour = self.user.popleft() if self.user else ctx.default
        return await behaviour(ctx)


@pytest.fixture
def slow_extractive(monkeypatch: pytest.MonkeyPatch) -> list[SummaryTask]:
    calls: list[SummaryTask] = []
    original = ExtractiveSummarizer.summarize

    async def slow(self: ExtractiveSummarizer, task: SummaryTask) -> SummaryResult:
        calls.append(task)
        await asyncio.sleep(SLOW)
        return await original(self, task)

    monkeypatch.setattr(ExtractiveSummarizer, "summarize", slow)
    return calls


async def stored(proxy: Proxy, session: str, source: str = "header") -> list[Checkpoint]:
    return decode_index(await proxy.server.app[STORE].get(checkpoints_key(SessionKey("default", session, source))))  # type: ignore[arg-type]


def assert_consistent(checkpoints: list[Checkpoint], conv: list[dict[str, Any]]) -> None:
    """Each checkpoint is true to the conversation: its hash is the chain hash of the first
    ``end`` messages, and its blocks tile ``[head, end)`` exactly."""
    chain = PrefixChain.of(conv)
    head = leading_system_count(conv)
    for checkpoint in checkpoints:
        assert head < checkpoint.end < len(conv)
        assert checkpoint.prefix_hash == chain.prefix_hash(checkpoint.end).hex(), checkpoint.end
        assert checkpoint.blocks, checkpoint
        assert checkpoint.blocks[0].start == head
        for before, after in itertools.pairwise(checkpoint.blocks):
            assert before.end == after.start, checkpoint.blocks
        assert checkpoint.blocks[-1].end == checkpoint.end
        assert all(block.start < block.end for block in checkpoint.blocks)
        assert checkpoint.summarizer in {"llm", "extractive"}


def sse_payloads(raw: bytes) -> list[bytes]:
    events = raw.replace(b"\r\n", b"\n").split(b"\n\n")
    return [e[len(b"data: ") :] for e in events if e.startswith(b"data: ")]


def assert_openai_error(body: Any) -> None:
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert {"message", "type", "param", "code"} <= set(error), error
    assert isinstance(error["message"], str) and error["message"]
    assert error["type"]


async def exchange(
    http: aiohttp.ClientSession, proxy: Proxy, session: str, messages: list[dict[str, Any]], stream: bool
) -> str:
    """One request; "ok" or "error" after checking the answer is well formed either way."""
    body = {"model": MODEL, "messages": messages, "stream": stream}
    headers = {"X-Session-Id": session, "Authorization": "Bearer sk-client"}
    async with http.post(proxy.url("/v1/chat/completions"), json=body, headers=headers) as resp:
        raw = await resp.read()
        expected = "echo: " + messages[-1]["content"]
        if resp.status != 200:
            assert resp.status in (502, 504), (resp.status, raw)
            assert_openai_error(orjson.loads(raw))
            return "error"
        if not stream:
            answer = orjson.loads(raw)
            assert answer["choices"][0]["message"]["content"] == expected
            return "ok"
        assert resp.content_type == "text/event-stream"
        payloads = sse_payloads(raw)
        assert payloads and payloads[-1] == b"[DONE]", raw  # always terminated
        chunks = [orjson.loads(p) for p in payloads[:-1]]
        errors = [c for c in chunks if "error" in c]
        if errors:
            assert len(errors) == 1 and chunks[-1] is errors[0], raw  # the error, then [DONE]
            assert_openai_error(errors[0])
            return "error"
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        assert text == expected
        assert any(c["choices"] and c["choices"][0]["finish_reason"] == "stop" for c in chunks)
        return "ok"


async def hold_store_exclusively(db: Path, seconds: float, held: asyncio.Event, tried: asyncio.Event) -> None:
    """Another process's writer holding the store's SQLite write lock until a Store lock is tried
    (``tried``), then ``seconds`` more: however slowly a loaded machine brings the requests to
    their lock, one of them meets the store locked."""
    connection = sqlite3.connect(db, timeout=5, isolation_level=None, check_same_thread=False)
    try:
        await asyncio.to_thread(connection.execute, "BEGIN EXCLUSIVE")
        held.set()
        await asyncio.wait_for(tried.wait(), DEADLINE)
        await asyncio.sleep(seconds)
        await asyncio.to_thread(connection.execute, "COMMIT")
    finally:
        connection.close()


def timed_lock_tries(monkeypatch: pytest.MonkeyPatch, tried: asyncio.Event) -> list[float]:
    """Seconds taken by every attempt to take a Store lock (one SQLite write transaction each);
    ``tried`` is set when the first starts."""
    tries: list[float] = []
    original = DiskLock._try_once

    async def timed(self: DiskLock) -> bool:
        tried.set()
        started = time.monotonic()
        try:
            return await original(self)
        finally:
            tries.append(time.monotonic() - started)

    monkeypatch.setattr(DiskLock, "_try_once", timed)
    return tries


# ------------------------------------------------------------------------------------------------


async def test_a_burst_under_mixed_faults_loses_nothing(
    make_proxy: MakeProxy, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await make_proxy({"default": cut_point(summarizer="llm", timeout=0.5)})
    router = Router(upstream.fake, monkeypatch)
    # Summary calls: one times out (2 s > summary_timeout 0.5 s), one fails, one is reset.
    router.summary.extend(
        [
            router.make(lambda f: f.reply_delay(2)),
            router.make(lambda f: f.reply_error(500, openai_error("boom", type="server_error"))),
            router.make(lambda f: f.reply_reset()),
        ]
    )
    # User calls: a reset, a stream cut after two events, a read timeout (2 s > read_timeout 1 s).
    user_faults = [
        router.make(lambda f: f.reply_reset()),
        router.make(lambda f: f.reply_stream(cut_after=2)),
        router.make(lambda f: f.reply_delay(2, then="auto")),
    ]
    router.user.extend(user_faults)
    assert upstream.fake.pending == 0

    conv = conversation(40)
    session = "trip-under-faults"
    turns = [23, 25, 27, 29, 31, 33, 35, 37]  # under the trigger, between trigger and window, over it
    db = Path(proxy.server.app[STORE].path) / "cache.db"  # type: ignore[attr-defined]
    assert db.exists()
    tried = asyncio.Event()
    lock_tries = timed_lock_tries(monkeypatch, tried)
    with structlog.testing.capture_logs() as logs:
        held = asyncio.Event()
        holder = asyncio.create_task(hold_store_exclusively(db, HOLD, held, tried))
        await asyncio.wait_for(held.wait(), DEADLINE)
        async with aiohttp.ClientSession() as http:
            burst = [
                asyncio.wait_for(exchange(http, proxy, session, turn(conv, t), stream=i % 2 == 0), DEADLINE)
                for i, t in enumerate(turns)
            ]
            outcomes = await asyncio.gather(*burst)
        await holder
        await asyncio.wait_for(proxy.server.app[TASKS].drain(5), DEADLINE)

    assert router.user_calls == len(turns)
    assert not router.user  # every user-facing fault was served ...
    assert outcomes.count("error") == len(user_faults)  # ... and failed exactly its own request
    assert outcomes.count("ok") == len(turns) - len(user_faults)
    assert router.summary_calls >= 1
    assert max(lock_tries) >= HOLD / 2  # the session lock waited for the locked store, and then ...
    fallbacks = [e for e in logs if e["event"] == "summary.llm_fallback"]
    assert fallbacks and fallbacks[0]["reason"] == "timeout"
    assert not [e for e in logs if e["event"] in ("compaction.failed", "compaction.store_unavailable")]  # ... got it
    assert not [e for e in logs if e.get("log_level") == "error"], [e for e in logs if e.get("log_level") == "error"]

    made = await stored(proxy, session)
    assert made, "the burst compacted the session"
    assert_consistent(made, conv)

    # Faults cleared: the whole conversation replays, turn by turn, through the OpenAI SDK.
    router.clear()
    client = openai.AsyncOpenAI(
        base_url=proxy.base_url, api_key="sk-client", max_retries=0, default_headers={"X-Session-Id": session}
    )
    try:
        for t in range(1, len(conv) // 2 + 1):
            messages = turn(conv, t)
            expected = "echo: " + messages[-1]["content"]
            if t % 2:
                answer = await asyncio.wait_for(
                    client.chat.completions.create(model=MODEL, messages=messages), DEADLINE
                )
                assert answer.choices[0].message.content == expected
            else:
                stream = await client.chat.completions.create(model=MODEL, messages=messages, stream=True)
                text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
                assert text == expected
    finally:
        await client.close()
    await proxy.server.app[TASKS].drain(5)
    assert_consistent(await stored(proxy, session), conv)


async def test_background_compaction_outlives_clients_that_leave(
    make_proxy: MakeProxy, upstream: Upstream, slow_extractive: list[SummaryTask]
) -> None:
    proxy = await make_proxy({"default": cut_point(mode="background", summarizer="extractive", timeout=5)})
    conv = conversation(40)
    session = "trip-background"
    headers = {"X-Session-Id": session}
    with structlog.testing.capture_logs() as logs:
        async with aiohttp.ClientSession() as http:
            # Triggers and fits: answered at once, the compaction runs in the background. The
            # client hangs up as soon as the response has started.
            body = {"model": MODEL, "messages": turn(conv, 27), "stream": True}
            resp = await http.post(proxy.url("/v1/chat/completions"), json=body, headers=headers)
            assert resp.status == 200
            first = CIMultiDict(resp.headers)
            resp.close()
            assert 2500 < int(first["X-Ctx-Tokens-Before"]) <= 3000
            assert "X-Ctx-Compacted" not in first
            # The next client, over the window, must wait for that compaction; it gives up.
            body = {"model": MODEL, "messages": turn(conv, 35)}
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(http.post(proxy.url("/v1/chat/completions"), json=body, headers=headers), 0.1)
        assert await stored(proxy, session) == []  # still being written
        await asyncio.wait_for(proxy.server.app[TASKS].drain(5), DEADLINE)
    made = await stored(proxy, session)
    events = [e for e in logs if e["event"] == "compaction"]
    assert events and slow_extractive
    assert len(made) == len(events)
    assert events[0]["range"][1] < 2 * 27  # the first request's own compaction was finished ...
    assert events[0]["range"][1] in {c.end for c in made}  # ... and kept
    assert_consistent(made, conv)
    assert len(upstream.fake.chat_requests()) == 1  # the client that left never got forwarded


async def test_inline_compaction_is_kept_when_the_client_leaves(
    make_proxy: MakeProxy, upstream: Upstream, slow_extractive: list[SummaryTask]
) -> None:
    proxy = await make_proxy({"default": cut_point(mode="inline", summarizer="extractive", timeout=5)})
    conv = conversation(40)
    session = "trip-inline-cancel"
    headers = {"X-Session-Id": session}
    messages = turn(conv, 35)  # over the window: compacted inline before forwarding
    async with aiohttp.ClientSession() as http:
        with pytest.raises(TimeoutError):
            body = {"model": MODEL, "messages": messages}
            await asyncio.wait_for(http.post(proxy.url("/v1/chat/completions"), json=body, headers=headers), 0.1)
        await asyncio.wait_for(proxy.server.app[TASKS].drain(5), DEADLINE)
        await asyncio.sleep(0.2)  # a handler that wrongly went on would forward now
        assert upstream.fake.chat_requests() == []
        [made] = await stored(proxy, session)
        assert len(slow_extractive) >= 1
        assert_consistent([made], conv)
        # The next request of the session uses it and does not compact again.
        async with http.post(proxy.url("/v1/chat/completions"), json=body, headers=headers) as resp:
            assert resp.status == 200, await resp.text()
            answer = await resp.json()
            again = CIMultiDict(resp.headers)
    assert answer["choices"][0]["message"]["content"] == "echo: " + messages[-1]["content"]
    assert again["X-Ctx-Summarized"] == str(made.end)
    assert "X-Ctx-Compacted" not in again
    assert int(again["X-Ctx-Tokens-After"]) <= 3000
    [forwarded] = upstream.fake.chat_requests()
    sent = forwarded.json()["messages"]
    assert sent[1]["content"].startswith("## Context Summary")
    assert sent[2:] == messages[made.end :]


@pytest.mark.parametrize("summary_fault", ["status_500", "timeout"])
async def test_a_failing_summariser_during_recovery_falls_back_to_extractive(
    make_proxy: MakeProxy, upstream: Upstream, summary_fault: str
) -> None:
    proxy = await make_proxy({"default": NONE_LLM})
    fake = upstream.fake
    fake.reply_error(400, OVERFLOW)  # the user call
    if summary_fault == "status_500":  # the recovery's summary call
        fake.reply_error(500, openai_error("The server had an error", type="server_error"))
    else:
        fake.reply_delay(2)  # > summary_timeout 0.5 s
    messages = history(30)
    session = f"recovery-{summary_fault}"
    with structlog.testing.capture_logs() as logs:
        if summary_fault == "status_500":
            async with aiohttp.ClientSession() as http:
                body = {"model": MODEL, "messages": messages}
                request = http.post(proxy.url("/v1/chat/completions"), json=body, headers={"X-Session-Id": session})
                async with await asyncio.wait_for(request, DEADLINE) as resp:
                    status, headers, answer = resp.status, CIMultiDict(resp.headers), await resp.json()
            assert status == 200, answer
            assert answer["choices"][0]["message"]["content"] == "echo: What did we decide?"
        else:
            client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=0)
            try:
                raw = await asyncio.wait_for(
                    client.chat.completions.with_raw_response.create(
                        model=MODEL, messages=messages, extra_headers={"X-Session-Id": session}
                    ),
                    DEADLINE,
                )
            finally:
                await client.close()
            headers = CIMultiDict(raw.headers)
            assert raw.parse().choices[0].message.content == "echo: What did we decide?"
    assert headers["X-Ctx-Retried"] == "1"
    requests = fake.chat_requests()
    user_calls = [r for r in requests if not is_summary_call(r.json())]
    assert len(user_calls) == 2  # the refused call and one retry
    assert 1 <= len(requests) - len(user_calls)  # recovery asked the model for a summary ...
    fallbacks = [e for e in logs if e["event"] == "summary.llm_fallback"]
    assert fallbacks and fallbacks[0]["reason"] == ("status" if summary_fault == "status_500" else "timeout")
    assert user_calls[0].json()["messages"] == messages
    retried = user_calls[1].json()["messages"]
    summary = retried[1]["content"]
    assert summary.startswith("## Context Summary")  # ... and got the extractive one instead
    assert "### " in summary
    assert retried[0] == messages[0] and retried[-1] == messages[-1]
    [made] = await stored(proxy, session)
    assert made.summarizer == "extractive"
    assert_consistent([made], messages)
    assert headers["X-Ctx-Summarized"] == str(made.end)


RATE_LIMIT = openai_error(
    "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Requested 41000. "
    "The input or output tokens must be reduced in order to run successfully.",
    type="tokens",
    code="rate_limit_exceeded",
)
OVERLOADED = openai_error("The server is overloaded or not ready yet.", type="server_error")


@pytest.mark.parametrize(
    ("status", "body", "extra"),
    [
        (429, RATE_LIMIT, {"Retry-After": "7", "x-ratelimit-remaining-tokens": "0"}),
        (503, OVERLOADED, {"Retry-After": "2"}),
    ],
    ids=["429", "503"],
)
async def test_rate_limits_and_server_errors_are_relayed_not_recovered(
    make_proxy: MakeProxy, upstream: Upstream, status: int, body: dict[str, Any], extra: dict[str, str]
) -> None:
    proxy = await make_proxy({"default": NONE_LLM})
    upstream.fake.reply_error(status, body, headers=extra)
    async with aiohttp.ClientSession() as http:
        request = http.post(proxy.url("/v1/chat/completions"), json={"model": MODEL, "messages": history(30)})
        async with await asyncio.wait_for(request, DEADLINE) as resp:
            assert resp.status == status
            assert await resp.json() == body
            headers = CIMultiDict(resp.headers)
    for name, value in extra.items():
        assert headers[name] == value
    assert "X-Ctx-Retried" not in headers
    assert len(upstream.fake.chat_requests()) == 1  # no summary, no retry


async def test_a_rate_limit_reaches_the_sdk_as_a_rate_limit(make_proxy: MakeProxy, upstream: Upstream) -> None:
    proxy = await make_proxy({"default": NONE_LLM})
    upstream.fake.reply_error(429, RATE_LIMIT, headers={"Retry-After": "7"})
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=0)
    try:
        with pytest.raises(openai.RateLimitError) as caught:
            await asyncio.wait_for(
                client.chat.completions.create(model=MODEL, messages=history(30), stream=True), DEADLINE
            )
    finally:
        await client.close()
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.response.headers["retry-after"] == "7"
    assert "x-ctx-retried" not in caught.value.response.headers
    assert len(upstream.fake.chat_requests()) == 1

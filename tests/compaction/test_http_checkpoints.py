"""Checkpoints end to end: a 40-turn conversation through ``cut_point`` over HTTP.

The client is stateless, as real ones are: every turn it resends the whole history, appends the
upstream's answer and a new user message. What the fake upstream received is compared with what
the client sent: ``[system] [assistant "context_summary"] [the client's own tail]``, the summary
reused between compactions with identical prefix bytes, and never a checkpoint whose prefix the
client no longer has (an edited early turn, a fork).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import openai
import pytest
from multidict import CIMultiDict

from ctxproxy.compaction.checkpoints import decode_index
from ctxproxy.services import STORE, TASKS
from ctxproxy.session import PrefixChain, SessionKey, message_digest
from ctxproxy.store.keys import checkpoints_key
from ctxproxy.strategies.base import Checkpoint
from ctxproxy.tokens import TokenCounter
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.fakes.upstream import Recorded

TENANT = """
default_context_window = 3000
[upstream]
base_url = "{upstream}"
[compaction]
strategy = "cut_point"
summarizer = "extractive"
summary_max_tokens = 300
# What these tests check is which checkpoint a fork uses; what a fork adds besides (the summary
# of the branch it left) is tested in tests/compaction/test_http_branch_summary.py.
branch_summary_max_tokens = 0
[compaction.cut_point]
reserve_tokens = 500
keep_recent_tokens = 800
[memory]
enabled = false  # compaction alone (memory is on by default for cut_point)
"""
MODEL = "ctx-test-model"  # in no built-in table: the tenant's default_context_window applies
SYSTEM = {"role": "system", "content": "You are a meticulous meeting planner."}
TURNS = 40
EDITED_TURN = 3
EDITED_INDEX = 2 * EDITED_TURN - 1  # [system, u1, a1, u2, a2, u3, ...]: turn k's user message
FORK_TURN = 20
FORK_INDEX = 2 * FORK_TURN + 1  # first message after the 20 shared turns (system + 40)


def user(turn: int, topic: str = "meeting room") -> dict[str, Any]:
    return {
        "role": "user",
        "content": f"Turn {turn}: the {topic} {turn} is booked for {turn % 12 + 8}:00 on Tuesday, and we decided "
        f"to invite team {turn}. Please confirm the plan for {topic} {turn} and list what to bring. The "
        f"projector in {topic} {turn} needs an HDMI adapter, and catering order {turn} must arrive by "
        f"{turn % 12 + 7}:45.",
    }


@dataclass
class Turn:
    sent: list[dict[str, Any]]
    headers: Mapping[str, str]
    forwarded: Recorded
    answer: str

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.forwarded.json()["messages"]

    @property
    def summarized(self) -> int | None:
        value = self.headers.get("X-Ctx-Summarized")
        return None if value is None else int(value)

    @property
    def compacted(self) -> bool:
        return self.headers.get("X-Ctx-Compacted") == "1"

    @property
    def summary(self) -> str | None:
        return self.messages[1]["content"] if self.summarized is not None else None

    @property
    def before(self) -> int:
        return int(self.headers["X-Ctx-Tokens-Before"])

    @property
    def after(self) -> int:
        return int(self.headers["X-Ctx-Tokens-After"])


class Client:
    """A stateless chat client over raw aiohttp; ``send`` returns what the upstream received."""

    def __init__(self, proxy: Proxy, upstream: Upstream, http: aiohttp.ClientSession) -> None:
        self.proxy, self.upstream, self.http = proxy, upstream, http

    async def send(self, messages: list[dict[str, Any]], headers: Mapping[str, str] | None = None) -> Turn:
        seen = len(self.upstream.fake.chat_requests())
        body = {"model": MODEL, "messages": messages}
        async with self.http.post(self.proxy.url("/v1/chat/completions"), json=body, headers=headers) as resp:
            assert resp.status == 200, await resp.text()
            data = await resp.json()
            answered = CIMultiDict(resp.headers)
        # Let the engine's follow-up work (the pending-request check) end before the next turn, as
        # it does for a human-paced client; the race it otherwise causes has its own test in
        # test_http_single_flight.py.
        await self.proxy.server.app[TASKS].drain(5)
        requests = self.upstream.fake.chat_requests()
        assert len(requests) == seen + 1  # the extractive summariser never calls the upstream
        return Turn(list(messages), answered, requests[-1], data["choices"][0]["message"]["content"])

    async def converse(self, history: list[dict[str, Any]], turns: range, topic: str = "meeting room") -> list[Turn]:
        """Play ``turns``: append a user message, send everything, append the answer."""
        played = []
        for n in turns:
            history.append(user(n, topic))
            turn = await self.send(history)
            history.append({"role": "assistant", "content": turn.answer})
            played.append(turn)
        return played


def check_shape(turn: Turn) -> None:
    """``[system] [summary] [client tail]`` when a checkpoint is used; else the client's list."""
    forwarded = turn.messages
    end = turn.summarized
    if end is None:
        assert forwarded == turn.sent
        assert turn.after == turn.before
        return
    assert forwarded[0] == turn.sent[0]  # the system message, as the client sent it
    summary = forwarded[1]
    assert summary["role"] == "assistant" and summary["name"] == "context_summary"
    assert summary["content"].startswith("## Context Summary\n")
    assert forwarded[2:] == turn.sent[end:]
    assert forwarded[-1] == turn.sent[-1]  # the last message is never altered
    assert turn.after < turn.before


async def stored_checkpoints(proxy: Proxy, session: str) -> list[Checkpoint]:
    return await stored_checkpoints_for(proxy, SessionKey("default", session, "derived"))


async def stored_checkpoints_for(proxy: Proxy, key: SessionKey) -> list[Checkpoint]:
    return decode_index(await proxy.server.app[STORE].get(checkpoints_key(key)))


async def play_main(
    proxy: Proxy, upstream: Upstream, http: aiohttp.ClientSession
) -> tuple[list[Turn], list[dict[str, Any]]]:
    history: list[dict[str, Any]] = [SYSTEM]
    turns = await Client(proxy, upstream, http).converse(history, range(1, TURNS + 1))
    return turns, history


def summaries_by_end(turns: list[Turn]) -> dict[int, str]:
    found: dict[int, str] = {}
    for turn in turns:
        if turn.summarized is not None:
            assert found.setdefault(turn.summarized, turn.summary or "") == turn.summary  # one text per checkpoint
    return found


@pytest.fixture
async def proxy(make_proxy: MakeProxy) -> Proxy:
    return await make_proxy({"default": TENANT})


# ------------------------------------------------------------------------------------------------


async def test_forty_turns_through_the_openai_sdk_compact_and_reuse_checkpoints(
    proxy: Proxy, upstream: Upstream
) -> None:
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    history: list[dict[str, Any]] = [SYSTEM]
    turns: list[Turn] = []
    for n in range(1, TURNS + 1):
        history.append(user(n))
        raw = await client.chat.completions.with_raw_response.create(model=MODEL, messages=history)
        answer = raw.parse().choices[0].message.content or ""
        assert answer == "echo: " + history[-1]["content"]
        turns.append(Turn(list(history), CIMultiDict(raw.headers.items()), upstream.fake.chat_requests()[-1], answer))
        await proxy.server.app[TASKS].drain(5)  # see Client.send
        history.append({"role": "assistant", "content": answer})
    await client.close()
    assert len(upstream.fake.chat_requests()) == TURNS

    counter = TokenCounter()
    for turn in turns:
        check_shape(turn)
        # X-Ctx-Tokens-Before / -After count exactly what the client sent / what was forwarded.
        for messages, header in ((turn.sent, "X-Ctx-Tokens-Before"), (turn.messages, "X-Ctx-Tokens-After")):
            digests = [message_digest(m) for m in messages]
            assert counter.count_messages(messages, digests, MODEL) == int(turn.headers[header])
    compacting = [t for t in turns if t.compacted]
    assert len(compacting) >= 2, [t.headers.get("X-Ctx-Summarized") for t in turns]
    assert turns[0].summarized is None and not turns[0].compacted  # small histories pass through
    sessions = {t.headers["X-Ctx-Session"] for t in turns}
    assert len(sessions) == 1

    for previous, turn in zip(turns, turns[1:], strict=False):
        if turn.compacted:
            # A new checkpoint covers more than the one before it (iterative, never shrinking).
            assert turn.summarized is not None and turn.summarized > (previous.summarized or 0)
            assert turn.summary != previous.summary
        elif previous.summarized is not None:
            # Reused: same checkpoint, same summary, and the bytes up to the previous request's
            # last message are identical (provider prompt caches keep hitting).
            assert turn.summarized == previous.summarized
            assert turn.summary == previous.summary
            before = previous.forwarded.body
            prefix = before[: before.rindex(b"]")]  # the body without the end of its messages array
            assert turn.forwarded.body.startswith(prefix)
            assert len(prefix) > len(turn.summary or "")

    # Iterative: each new summary updates the previous one, so the conversation's first request
    # is still its Goal after every compaction (a summary of the new range alone would lose it).
    for turn in compacting:
        goal = (turn.summary or "").split("### Goal\n", 1)[1].split("\n\n", 1)[0]
        assert goal.startswith("- Turn 1:"), turn.summary

    # The store holds exactly the checkpoints the responses announced.
    stored = await stored_checkpoints(proxy, sessions.pop())
    assert sorted(c.end for c in stored) == [t.summarized for t in compacting]
    for checkpoint in stored:
        assert checkpoint.prefix_hash == PrefixChain.of(history).prefix_hash(checkpoint.end).hex()


async def test_summarized_counts_the_first_messages_and_covered_system_messages_stay_verbatim(
    proxy: Proxy, upstream: Upstream
) -> None:
    """``X-Ctx-Summarized: k``: the request's first k messages are represented by the summary; a
    system message among them is still forwarded verbatim, before the summary (README)."""
    note = {"role": "system", "content": "From now on, quote all prices in euros."}
    async with aiohttp.ClientSession() as http:
        client = Client(proxy, upstream, http)
        history: list[dict[str, Any]] = [SYSTEM]
        turns = await client.converse(history, range(1, 5))
        history.append(note)
        turns += await client.converse(history, range(5, 31))
    note_index = history.index(note)
    turn = next(t for t in turns if t.compacted)
    end = turn.summarized
    assert end is not None and end > note_index  # the note lies in the summarised range
    forwarded = turn.messages
    assert forwarded[:2] == [SYSTEM, note]
    assert forwarded[2]["name"] == "context_summary" and forwarded[2]["content"].startswith("## Context Summary\n")
    assert forwarded[3:] == turn.sent[end:]
    assert note["content"] not in forwarded[2]["content"]  # instructions are not summarised
    # Every later turn forwards the note the same way.
    for later in turns[turns.index(turn) :]:
        assert later.messages[:2] == [SYSTEM, note] and later.summarized is not None
        assert later.messages[3:] == later.sent[later.summarized :]


async def test_editing_turn_3_of_40_never_uses_a_checkpoint_made_before_the_edit(
    proxy: Proxy, upstream: Upstream
) -> None:
    async with aiohttp.ClientSession() as http:
        client = Client(proxy, upstream, http)
        turns, history = await play_main(proxy, upstream, http)
        old_summaries = summaries_by_end(turns)
        assert min(old_summaries) > EDITED_INDEX  # every checkpoint covers the message we edit

        edited = [dict(m) for m in turns[-1].sent]  # the turn-40 request, resent with turn 3 changed
        assert edited[EDITED_INDEX] == user(EDITED_TURN)
        edited[EDITED_INDEX]["content"] = (
            "Turn 3, corrected: the venue moved to Harbour Hall, booked for 11:15 on Friday for team 3."
        )
        after_edit = await client.send(edited)

        check_shape(after_edit)
        end = after_edit.summarized
        assert end is None or end <= EDITED_INDEX or after_edit.compacted
        if end is not None and end > EDITED_INDEX:
            assert after_edit.summary not in old_summaries.values()
            assert "Harbour Hall" in (after_edit.summary or "")  # the new summary was made from the edit
        else:
            assert "Harbour Hall" in after_edit.forwarded.body.decode()  # the edit is forwarded raw
        # Whatever checkpoint was used, its prefix is the edited history's, edit included.
        if end is not None:
            stored = await stored_checkpoints(proxy, after_edit.headers["X-Ctx-Session"])
            used = [
                c for c in stored if c.end == end and c.prefix_hash == PrefixChain.of(edited).prefix_hash(end).hex()
            ]
            assert len(used) == 1

        # The original branch still gets its own newest checkpoint, not the edited one.
        history.append(user(TURNS + 1))
        original = await client.send(history)
        check_shape(original)
        assert original.summarized == max(old_summaries)
        assert original.summary == old_summaries[max(old_summaries)]
        assert not original.compacted


async def test_fork_at_turn_20_uses_the_longest_checkpoint_before_the_fork_never_the_other_branch(
    proxy: Proxy, upstream: Upstream
) -> None:
    async with aiohttp.ClientSession() as http:
        client = Client(proxy, upstream, http)
        turns, history = await play_main(proxy, upstream, http)
        main = summaries_by_end(turns)
        before_fork = [end for end in main if end <= FORK_INDEX]
        after_fork = [end for end in main if end > FORK_INDEX]
        assert before_fork and after_fork  # the scenario needs checkpoints on both sides of the fork

        fork = [dict(m) for m in history[:FORK_INDEX]]
        assert fork == turns[FORK_TURN - 1].sent + [{"role": "assistant", "content": turns[FORK_TURN - 1].answer}]
        fork_turns = await client.converse(fork, range(FORK_TURN + 1, TURNS + 1), topic="garden party")

        first = fork_turns[0]
        check_shape(first)
        assert first.summarized == max(before_fork)  # the longest one that still matches
        assert first.summary == main[max(before_fork)]
        assert not first.compacted

        made_on_fork: set[int] = set()
        for turn in fork_turns:
            check_shape(turn)
            if turn.compacted:
                assert turn.summarized is not None
                made_on_fork.add(turn.summarized)
            assert turn.summarized is not None
            assert turn.summarized <= FORK_INDEX or turn.summarized in made_on_fork
            assert turn.summary not in {main[end] for end in after_fork}
        assert made_on_fork  # the fork grew long enough to compact on its own

        # And the main branch never picks up the fork's checkpoints.
        history.append(user(TURNS + 1))
        back = await client.send(history)
        check_shape(back)
        assert back.summarized == max(main) and back.summary == main[max(main)]


async def test_fork_exactly_at_a_checkpoint_end_reuses_that_checkpoint(proxy: Proxy, upstream: Upstream) -> None:
    async with aiohttp.ClientSession() as http:
        client = Client(proxy, upstream, http)
        turns, history = await play_main(proxy, upstream, http)
        main = summaries_by_end(turns)
        end = min(e for e in main if e > FORK_INDEX)
        # Same first `end` messages, then a different answer to the message at end - 1 and a new question.
        fork = [dict(m) for m in history[:end]]
        fork.append({"role": "assistant", "content": "A different answer, regenerated by the user."})
        fork.append(user(99, topic="boat trip"))
        turn = await client.send(fork)
        check_shape(turn)
        assert turn.summarized == end
        assert turn.summary == main[end]
        assert turn.messages[2:4] == fork[end : end + 2]

        # One message fewer than the checkpoint covers: it cannot be used, an older one is.
        short = [dict(m) for m in history[: end - 1]] + [user(98, topic="boat trip")]
        turn = await client.send(short)
        check_shape(turn)
        assert turn.summarized is not None and turn.summarized < end
        assert turn.summarized in main or turn.compacted


async def test_a_shared_session_id_never_lends_one_conversations_checkpoint_to_another(
    proxy: Proxy, upstream: Upstream
) -> None:
    async with aiohttp.ClientSession() as http:
        client = Client(proxy, upstream, http)
        body_headers = {"X-Session-Id": "team-chat-1"}
        first = [SYSTEM, *(m for n in range(1, 41) for m in (user(n), {"role": "assistant", "content": "ok"}))]
        first.append(user(41))
        other = [
            SYSTEM,
            *(m for n in range(1, 41) for m in (user(n, "lab bench"), {"role": "assistant", "content": "ok"})),
        ]
        other.append(user(41, "lab bench"))
        a = await client.send(first, headers=body_headers)
        b = await client.send(other, headers=body_headers)
    assert a.headers["X-Ctx-Session"] == b.headers["X-Ctx-Session"] == "team-chat-1"
    assert a.compacted and b.compacted  # b made its own: a's prefix is not b's
    check_shape(a)
    check_shape(b)
    assert "meeting room" not in (b.summary or "") and "lab bench" in (b.summary or "")
    stored = await stored_checkpoints_for(proxy, SessionKey("default", "team-chat-1", "header"))
    assert len(stored) == 2


async def test_regenerating_the_last_message_or_resending_content_as_parts_keeps_the_checkpoint(
    proxy: Proxy, upstream: Upstream
) -> None:
    async with aiohttp.ClientSession() as http:
        client = Client(proxy, upstream, http)
        turns, history = await play_main(proxy, upstream, http)
        last = turns[-1]
        assert last.summarized is not None and not last.compacted
        # Regenerate: the same history with a different last question.
        regenerated = [*last.sent[:-1], {"role": "user", "content": "Actually, summarise the catering orders."}]
        again = await client.send(regenerated)
        # The same history with every content as a list of text parts (the same conversation).
        as_parts = [{**m, "content": [{"type": "text", "text": m["content"]}]} for m in last.sent]
        parts = await client.send(as_parts)
    for turn in (again, parts):
        check_shape(turn)
        assert turn.summarized == last.summarized and not turn.compacted
        assert turn.summary == last.summary
    assert parts.messages[2:] == as_parts[last.summarized :]  # the tail as the client wrote it


async def test_a_streamed_request_is_forwarded_with_the_checkpoint_and_relayed_as_sse(
    proxy: Proxy, upstream: Upstream
) -> None:
    async with aiohttp.ClientSession() as http:
        turns, history = await play_main(proxy, upstream, http)
        history.append(user(TURNS + 1))
        body = {"model": MODEL, "stream": True, "stream_options": {"include_usage": True}, "messages": history}
        async with http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
            assert resp.status == 200
            assert resp.content_type == "text/event-stream"
            headers = CIMultiDict(resp.headers)
            raw = await resp.read()
    assert headers["X-Ctx-Summarized"] == str(turns[-1].summarized)
    assert int(headers["X-Ctx-Tokens-After"]) < int(headers["X-Ctx-Tokens-Before"])
    assert raw.rstrip().endswith(b"data: [DONE]")
    events = [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in events if c["choices"])
    assert text == "echo: " + history[-1]["content"]
    assert events[-1]["usage"]["prompt_tokens"] > 0
    forwarded = upstream.fake.chat_requests()[-1].json()
    assert forwarded["stream"] is True and forwarded["stream_options"] == {"include_usage": True}
    assert forwarded["messages"][1]["content"] == turns[-1].summary
    assert forwarded["messages"][2:] == history[turns[-1].summarized :]

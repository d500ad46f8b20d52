"""A recalled page restored into the window, through the real proxy and the ``openai`` SDK: the
model reads page 2 back with ``ctxproxy_recall_page`` (the fake upstream scripts the call), and
the client's following requests carry it again, raw, right after the Contents Page, until it
ages out; a window too small for it leaves it out rather than overflowing."""

from __future__ import annotations

from typing import Any

import openai
import orjson

from ctxproxy.session import message_digest
from ctxproxy.tokens import TokenCounter
from tests.conftest import MakeProxy, Proxy, Upstream
from tests.recall.paged import PAGED_TENANT, RECALL

# Two pages stay raw, four are archived at a time: archivals at turns 6 (pages 1-4) and 10 (5-8).
TENANT = PAGED_TENANT.replace("archive_batch = 1", "archive_batch = 4") + '[models."small"]\ncontext_window = 1500\n'
FACTS = {2: "The staging database is called orders-stg, and its replica is orders-stg-ro."}
COUNTER = TokenCounter()


def history(turn: int, facts: dict[int, str] = FACTS) -> list[dict[str, Any]]:
    """The request of turn ``turn``: pages 1 … turn − 1 answered, and the new question."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant."}]
    for n in range(1, turn):
        messages.append({"role": "user", "content": facts.get(n, f"Question {n} about the balcony tomatoes.")})
        messages.append({"role": "assistant", "content": f"Noted ({n})."})
    return [*messages, {"role": "user", "content": f"Question {turn}: anything else?"}]


def recall(page: int) -> dict[str, Any]:
    return {"function": {"name": RECALL, "arguments": orjson.dumps({"page_index": page}).decode()}}


async def ask(proxy: Proxy, messages: list[dict[str, Any]], model: str = "m") -> tuple[str, int]:
    """One request through the ``openai`` SDK, in a session of ``model``'s own: the answer and
    ``X-Ctx-Tokens-After``."""
    headers = {"X-Session-Id": f"restore-{model}"}
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0, default_headers=headers)
    try:
        raw = await client.chat.completions.with_raw_response.create(model=model, messages=messages)  # type: ignore[arg-type]
        return raw.parse().choices[0].message.content or "", int(raw.headers["X-Ctx-Tokens-After"])
    finally:
        await client.close()


def forwarded(upstream: Upstream, index: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = upstream.fake.chat_requests()[index].json()["messages"]
    return messages


async def test_a_recalled_page_is_restored_for_the_following_turns_until_it_ages_out(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """Note 004: the model calls the recall tool, and the system "restores the page from the file
    system and inserts it into the window" (从文件系统恢复 Page，插入窗口), then "updates the recalled
    page's recall time and count" (更新召回统计), which the Contents Page shows as "召回次数: 2,
    最后召回: 5轮前" (recalled 2 times, last recalled 5 turns ago). The window is the newest n pages
    (ActiveChapter 管理最近 n page) and what falls out of it is archived again: page 2, recalled
    during turn 6, stays in the window as long as page 6 does — turns 7, 8 and 9 — and leaves at
    the archival of turn 10, which archives page 6."""
    proxy = await make_proxy({"default": TENANT})
    upstream.fake.reply_json(tool_calls=[recall(2)])
    upstream.fake.reply_json("orders-stg, with the replica orders-stg-ro.")
    assert (await ask(proxy, history(6)))[0] == "orders-stg, with the replica orders-stg-ro."
    assert len(upstream.fake.chat_requests()) == 2  # the tool loop: the answer came in round two

    seen = {}
    for turn in (7, 8, 9, 10):
        already = len(upstream.fake.chat_requests())
        await ask(proxy, history(turn))
        seen[turn] = forwarded(upstream, already)

    page_two = history(7)[3:5]  # as the client sent it: the fact and its answer
    for turn in (7, 8, 9):
        messages = seen[turn]
        assert messages[1]["name"] == "contents_page"
        assert messages[2:4] == page_two, turn  # right after the Contents Page, raw
        assert messages[4:] == history(turn)[9:]  # then the raw pages 5 … turn − 1 and the question
        assert "(recalled 1×, last recalled 1 turn ago)" in messages[1]["content"]
    # Byte for byte the same from one request to the next (the prompt cache keeps hitting).
    assert seen[7][:4] == seen[8][:4] == seen[9][:4]

    after = seen[10]
    assert FACTS[2] not in orjson.dumps(after[2:]).decode()  # aged out with page 6
    assert after[2:] == history(10)[17:]  # pages 9 and the question
    assert "[Page #2] User: The staging database" in after[1]["content"]  # still listed, still recallable
    assert "(recalled 1×, last recalled 4 turns ago)" in after[1]["content"]


async def test_the_client_s_next_request_of_the_same_turn_has_the_page_too(
    make_proxy: MakeProxy, upstream: Upstream
) -> None:
    """The model read page 2 and called the client's tool in the same turn: the client's next
    request (its tool result) no longer carries the tool answer, so the page is restored there."""
    proxy = await make_proxy({"default": TENANT})
    upstream.fake.reply_json(tool_calls=[recall(2)])
    weather = {"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    upstream.fake.reply_json(tool_calls=[weather])
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    first = await client.chat.completions.create(model="m", messages=history(6), tools=tools)  # type: ignore[arg-type]
    assert first.choices[0].finish_reason == "tool_calls"
    follow = [*history(6), first.choices[0].message.model_dump(exclude_none=True)]
    follow.append({"role": "tool", "tool_call_id": "call_w", "content": "sunny"})
    await client.chat.completions.create(model="m", messages=follow, tools=tools)  # type: ignore[arg-type]
    await client.close()
    sent = forwarded(upstream, -1)
    assert sent[2:4] == history(6)[3:5]
    assert "(recalled 1×, last recalled this turn)" in sent[1]["content"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_w", "content": "sunny"}


async def test_a_page_that_does_not_fit_the_window_is_left_out(make_proxy: MakeProxy, upstream: Upstream) -> None:
    """Restored pages never push the prompt over the window: a page too large for the room the
    prompt leaves is not restored (the model can still read it with the recall tool), and the
    forwarded prompt stays within the window. The same conversation on a large window has it."""
    big = {2: "The staging runbook, in full: " + " ".join(f"step{i} check{i}" for i in range(300))}
    proxy = await make_proxy({"default": TENANT})
    for model in ("small", "m"):
        upstream.fake.reply_json(tool_calls=[recall(2)])
        upstream.fake.reply_json("Step 1 is check 1.")
        await ask(proxy, history(6, big), model)
        assert forwarded(upstream, -1)[-1]["content"].startswith("## Page #2")  # read back (clipped when small)
        already = len(upstream.fake.chat_requests())
        _, tokens = await ask(proxy, history(7, big), model)
        sent = forwarded(upstream, already)
        assert "(recalled 1×, last recalled 1 turn ago)" in sent[1]["content"]
        restored = any(m.get("content") == big[2] for m in sent)
        if model == "small":
            assert not restored and tokens <= 1500
            assert counted(sent) + counted_tools(upstream, already) <= 1500
        else:
            assert restored and tokens > 1500  # what the small window could not hold


def counted(messages: list[dict[str, Any]]) -> int:
    return sum(COUNTER.count_message(m, message_digest(m)) for m in messages) + 3


def counted_tools(upstream: Upstream, index: int) -> int:
    tools = upstream.fake.chat_requests()[index].json().get("tools") or []
    return COUNTER.count_tools(tools) if tools else 0

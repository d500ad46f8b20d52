"""Recalling an archived page on both protocols: a long ``paged`` conversation, the model calls
ctxproxy's ``recall_page``, ctxproxy answers it from the archive, the client gets only the final
answer, and the page's recall is counted (the statistic the Contents Page's eviction reads)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.protocols.conversation import SYSTEM, conversation, exchange
from tests.protocols.test_strategies import PAGED
from tests.recall.paged import RECALL, SEARCH

ANSWER = "We picked the rye starter for order 3."


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_the_model_recalls_an_archived_page(protocol: Any, stream: bool) -> None:
    await protocol.start(strategy="paged", extra=PAGED)
    protocol.script_call(RECALL, {"page_index": 3}, ANSWER, stream=stream)
    turns = conversation(8)
    reply = await protocol.send(SYSTEM, turns, stream=stream)
    assert reply.text == ANSWER and reply.compacted
    assert protocol.requests() == 2
    first, second = protocol.forwarded(0), protocol.forwarded(1)
    assert protocol.offered_tools(first) == [RECALL, SEARCH]
    assert protocol.offered_tools(second) == protocol.offered_tools(first)
    (answer,) = protocol.tool_answers(second)
    assert answer.startswith("## Page #3") and turns[4]["content"] in answer  # order 3, as the client sent it
    assert first.newest == turns[-1] and second.messages[: len(first.messages)] == first.messages
    protocol.check_valid(second)
    pages = await protocol.pages(reply.headers["X-Ctx-Session"])
    assert pages[3]["recalls"] == 1
    assert [n for n, page in pages.items() if page["recalls"]] == [3]


async def test_nothing_archived_offers_no_tools(protocol: Any) -> None:
    await protocol.start(strategy="paged", extra=PAGED)
    reply = await protocol.send(SYSTEM, conversation(1))
    assert not reply.compacted and protocol.offered_tools(protocol.forwarded()) == []


async def test_the_recalled_page_is_back_in_the_next_request(protocol: Any) -> None:
    """Note 004: the recalled page is "restored from the archive and inserted into the window"
    (从文件系统恢复 Page，插入窗口) — not only answered once: the client's next request, which has
    no trace of the tool call, is forwarded with page 3 (order 3, as the client sent it) right
    after the Contents Page, which says when it was recalled ("最后召回: 1轮前"). Two pages stay
    raw and one is archived a turn (``PAGED``): the page recalled during turn 9 ages out with page
    9, at turn 11."""
    await protocol.start(strategy="paged", extra=PAGED)
    protocol.script_call(RECALL, {"page_index": 3}, ANSWER)
    turns = conversation(8)
    await protocol.send(SYSTEM, turns)
    later = [*turns, {"role": "assistant", "content": ANSWER}, {"role": "user", "content": "And order 5?"}]
    await protocol.send(SYSTEM, later)
    sent = protocol.forwarded()
    protocol.check_valid(sent)
    texts = [m["content"] for m in sent.messages]
    flat = "\n".join(texts)
    order = exchange(3)[0]["content"]  # in full: the Contents Page has only its first sentence
    assert flat.index("## Contents Page") < flat.index(order) < flat.index("Which starter did we pick")
    assert texts[next(i for i, t in enumerate(texts) if order in t) + 1] == "Confirmed order 3."
    assert "(recalled 1×, last recalled 1 turn ago)" in flat
    assert sent.newest == later[-1]

    after = [*later, {"role": "assistant", "content": "Order 5 is on the rye too."}, {"role": "user", "content": "Ok."}]
    await protocol.send(SYSTEM, after)
    gone = "\n".join(m["content"] for m in protocol.forwarded().messages)
    assert order not in gone and "[Page #3]" in gone  # aged out of the window, still listed

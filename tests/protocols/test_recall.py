"""Recalling an archived page on both protocols: a long ``paged`` conversation, the model calls
ctxproxy's ``recall_page``, ctxproxy answers it from the archive, the client gets only the final
answer, and the page's recall is counted (the statistic the Contents Page's eviction reads)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.protocols.conversation import SYSTEM, conversation
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

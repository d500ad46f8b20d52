"""Every strategy compacts a long conversation in a small window the same way for both protocols,
and a repeat of the same request reuses the compaction instead of making another."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compaction.test_http_strategies import OPTIONS
from tests.protocols.conversation import SYSTEM, conversation, with_tools
from tests.recall.paged import PAGED_TENANT

PAGED = PAGED_TENANT[PAGED_TENANT.index("[compaction.paged]") :]
# rounds compresses B rounds a request unless told to catch up: one request, one compaction.
STRATEGIES = {**OPTIONS, "rounds": OPTIONS["rounds"] + "catch_up = true\n", "paged": PAGED}
WINDOW = 1200


@pytest.mark.parametrize("tools", [False, True], ids=["text", "tools"])
@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
async def test_each_strategy_compacts_once_and_keeps_the_newest_turn(protocol: Any, strategy: str, tools: bool) -> None:
    await protocol.start(window=WINDOW, strategy=strategy, extra=STRATEGIES[strategy])
    turns = with_tools(12) if tools else conversation(24)
    first = await protocol.send(SYSTEM, turns)
    sent = protocol.forwarded()
    assert first.compacted, dict(first.headers)
    assert first.headers["X-Ctx-Strategy"] == strategy
    assert first.count("Tokens-After") < first.count("Tokens-Before")
    assert sent.newest == turns[-1]
    assert len(sent.messages) < len(turns)
    protocol.check_valid(sent)
    await protocol.settle()

    again = await protocol.send(SYSTEM, turns)
    assert not again.compacted, dict(again.headers)
    assert protocol.forwarded().conversation == sent.conversation
    assert again.count("Tokens-After") == first.count("Tokens-After")

    streamed = await protocol.send(SYSTEM, turns, stream=True)  # the same compacted prompt, streamed
    assert not streamed.compacted and streamed.text == again.text
    assert protocol.forwarded().messages == sent.messages

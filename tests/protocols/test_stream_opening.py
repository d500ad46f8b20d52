"""One rule on both protocols for an overflow the upstream states inside a 200 stream
(``ctxproxy.upstream.opening``): before the first content event — after only a keep-alive and the
role-only delta, or ``message_start`` and ``ping`` — it is compacted and retried, and the client's
SDK reads one clean answer; after content, the client gets the content, then the upstream's error,
and nothing is retried. And a stream is relayed as it comes: its first content reaches the client
before the upstream sends the rest.

The fakes pace the opening's events (``PACE``) so the refusal reaches the proxy in a read of its
own; the content cases wait on an event the client sets once it has read the content (the fake
gives up after ``GATE_TIMEOUT`` seconds, which fails the test: a proxy that held the content back
never lets the rest follow).
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.protocols.conversation import SYSTEM, conversation

PIECES = ["The answer ", "is 42."]


def gate_at(gate: asyncio.Event, text: str) -> Any:
    """What the client calls after each piece: sets ``gate`` once it has read ``text``."""

    def seen(so_far: str) -> None:
        if so_far == text:
            gate.set()

    return seen


async def test_an_overflow_after_the_opening_is_compacted_and_retried(protocol: Any) -> None:
    await protocol.start(window=1_000_000)  # ctxproxy thinks it fits: only the upstream knows better
    protocol.refuse_after_opening()
    turns = conversation(30)

    streamed = await protocol.read_stream(SYSTEM, turns, lambda text: None)

    assert streamed.error is None
    assert streamed.text == "echo: " + turns[-1]["content"]
    assert streamed.headers["X-Ctx-Retried"] == "1"
    assert protocol.requests() == 2
    refused, retried = protocol.forwarded(0), protocol.forwarded(1)
    assert refused.messages == turns and len(retried.messages) < len(turns)
    protocol.check_valid(retried)


async def test_an_overflow_after_content_is_relayed_after_it_not_retried(protocol: Any) -> None:
    await protocol.start(window=1_000_000)
    gate = asyncio.Event()
    protocol.refuse_after_content(PIECES, gate)

    streamed = await protocol.read_stream(SYSTEM, conversation(30), gate_at(gate, "".join(PIECES)))

    assert streamed.text == "".join(PIECES)
    assert streamed.error == protocol.refusal()  # the upstream's own error, as it came
    assert "X-Ctx-Retried" not in streamed.headers
    assert protocol.requests() == 1


async def test_the_first_content_reaches_the_client_before_the_rest_is_sent(protocol: Any) -> None:
    await protocol.start()
    gate = asyncio.Event()
    protocol.stream_held(PIECES, gate)

    streamed = await protocol.read_stream(SYSTEM, conversation(2), gate_at(gate, PIECES[0]))

    assert gate.is_set() and streamed.error is None
    assert streamed.text == "".join(PIECES)

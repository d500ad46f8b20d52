"""Note 002's layered memory on both protocols, as ``rounds`` does it by default: what each round
says of the user and of the project is extracted after the round, and a later conversation of
that user in that scope opens with ``## User Memory`` and ``## Scope Memory`` — in a body the
protocol accepts — while ``X-Ctx-Rounds-Full`` / ``X-Ctx-Rounds-Cached`` set A and B per request."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from google.genai import errors as genai_errors

ROUNDS = "[compaction.rounds]\nfull_context_turns = 2\ncached_context_turns = 2\n"
WHO = {"X-Ctx-User": "alice", "X-Ctx-Scope": "orders-team"}
ROUND = [
    {"role": "user", "content": "I'm a backend engineer and I prefer short answers."},
    {"role": "assistant", "content": "Noted, short answers."},
    {"role": "user", "content": "We decided to use PostgreSQL 16 for the orders service database."},
    {"role": "assistant", "content": "Good choice: PostgreSQL 16 it is for orders."},
    {"role": "user", "content": "Thanks."},
]
QUESTION = [{"role": "user", "content": "Which PostgreSQL version does the orders service use?"}]


async def test_a_round_becomes_user_and_scope_memory_that_open_the_next_conversation(protocol: Any) -> None:
    """Note 002: "每轮对话后仅抽取 User + Scope" (after each round only User and Scope are
    extracted), and "[User Memory] [Scope Memory] [Session Memory] [raw] [current user]"."""
    await protocol.start(strategy="rounds", extra=ROUNDS)
    first = await protocol.send("You help with databases.", ROUND, **WHO)
    assert not first.compacted  # two finished rounds, below A + B: the layers come from the rounds
    await protocol.settle()

    reply = await protocol.send("You help.", QUESTION, **WHO)
    sent = protocol.forwarded()
    protocol.check_valid(sent)
    # (A Messages body opens with a user turn: the adapter says whose context the first one is,
    # and the layers and the question it opens with are that turn's parts, not an assistant turn.)
    layers = [part["content"] for part in sent.parts[:2]]
    assert "## User Memory" in layers[0] and layers[1].startswith("## Scope Memory")
    assert "backend engineer" in layers[0] and "PostgreSQL" not in layers[0]
    assert "PostgreSQL 16" in layers[1]
    assert sent.parts[2:] == QUESTION  # the client's question, with nothing of ours after it
    assert reply.count("Memories") == sum(text.count("\n- ") for text in layers) > 0


@pytest.mark.parametrize(
    ("header", "value"),
    [("X-Ctx-Rounds-Full", "0"), ("X-Ctx-Rounds-Cached", "101"), ("X-Ctx-Rounds-Full", "<script>two</script>")],
)
async def test_a_bad_rounds_header_is_refused_in_the_clients_shape(protocol: Any, header: str, value: str) -> None:
    """Note 002: "请求体：fullContextTurns、cachedContextTurns 可覆盖单次请求" — as headers here,
    whole numbers from 1 to 100; anything else is a 400 naming the header."""
    await protocol.start(strategy="rounds")
    with pytest.raises((openai.APIStatusError, anthropic.APIStatusError, genai_errors.APIError)) as raised:
        await protocol.send(None, QUESTION, **{header: value})
    if isinstance(raised.value, genai_errors.APIError):  # Google's error object
        body = raised.value.details
        assert raised.value.code == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    else:
        assert raised.value.status_code == 400
        body = raised.value.response.json()
    if protocol.name in ("openai", "responses"):  # OpenAI's error object (chat completions, Responses)
        assert body["error"]["param"] == header and body["error"]["type"] == "invalid_request_error"
    elif protocol.name == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert header in str(body) and "script" not in str(body)  # named, never echoed
    assert protocol.requests() == 0


async def test_the_rounds_headers_set_a_and_b_for_one_request(protocol: Any) -> None:
    """Two finished rounds and a question: with the default A = 4 (and B = 10) nothing is
    compressed; the same request asking for A = 1, B = 1 compresses its two oldest rounds, four
    messages — every whole batch of B that leaves A raw at once (catch-up, on with the default
    optimise = "cost")."""
    await protocol.start(strategy="rounds")
    plain = await protocol.send(None, ROUND)
    assert not plain.compacted
    squeezed = await protocol.send(None, ROUND, **{"X-Ctx-Rounds-Full": "1", "X-Ctx-Rounds-Cached": "1"})
    assert squeezed.compacted and squeezed.count("Summarized") == 4

"""The rule for an overflow inside a stream (``ctxproxy.upstream.opening``), for both protocols'
events: an overflow before the first content event is an ``Overflow``, however the bytes were
split into reads; from the first content event on, everything read is returned to be relayed.

The reader hands out the given chunks one ``readany`` at a time, as aiohttp's does when the bytes
arrive apart; the HTTP tests (``tests/recovery/test_overflow_before_content.py``) drive the same
rule through the proxy.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxproxy.upstream.opening import MAX_HELD, open_stream
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.upstream.overflow_numbers import OverflowNumbers
from ctxproxy.upstream.sse import CHAT_EVENTS, EventFramer
from ctxproxy.wire.anthropic.relay import MESSAGES_EVENTS, MessagesFramer


class Chunks:
    """Hands out one chunk per ``readany``, then b"" (the end); counts the reads."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)
        self.reads = 0

    async def readany(self) -> bytes:
        self.reads += 1
        return self.chunks.pop(0) if self.chunks else b""


def chat(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def message(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + json.dumps(data).encode() + b"\n\n"


ROLE = chat({"role": "assistant", "content": "", "refusal": None})
KEEPALIVE = b": keep-alive\n\n"
AZURE_FIRST = b'data: {"choices": [], "prompt_filter_results": [{"prompt_index": 0}]}\n\n'
TEXT = chat({"content": "Hel"})
CHAT_OVERFLOW = b'data: {"error": {"message": "prompt is too long: 9120 tokens > 8192 maximum"}}\n\n'
CHAT_OTHER_ERROR = b'data: {"error": {"message": "The server is overloaded", "type": "server_error"}}\n\n'

START = message("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 9}}})
PING = message("ping", {"type": "ping"})
BLOCK = message("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {}})
MESSAGES_OVERFLOW = message(
    "error",
    {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 9120 tokens > 8192 maximum"},
    },
)
NUMBERS = OverflowNumbers(limit=8192, prompt=9120)

CHAT = (CHAT_EVENTS, EventFramer)
MESSAGES = (MESSAGES_EVENTS, MessagesFramer)


async def opened(protocol: tuple[Any, Any], chunks: list[bytes]) -> tuple[bytes | Overflow, Chunks]:
    kinds, framer = protocol
    reader = Chunks(chunks)
    return await open_stream(reader, framer(), kinds), reader  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("protocol", "before", "refusal"),
    [
        (CHAT, [ROLE], CHAT_OVERFLOW),
        (CHAT, [KEEPALIVE, ROLE], CHAT_OVERFLOW),
        (CHAT, [AZURE_FIRST, ROLE], CHAT_OVERFLOW),
        (MESSAGES, [START], MESSAGES_OVERFLOW),
        (MESSAGES, [START, PING], MESSAGES_OVERFLOW),
    ],
    ids=["role", "keepalive_role", "azure_first_chunk", "message_start", "message_start_ping"],
)
@pytest.mark.parametrize("split", ["apart", "together", "mid_event"])
async def test_an_overflow_before_content_is_an_overflow_however_it_arrives(
    protocol: tuple[Any, Any], before: list[bytes], refusal: bytes, split: str
) -> None:
    if split == "apart":
        chunks = [*before, refusal]
    elif split == "together":
        chunks = [b"".join(before) + refusal]
    else:
        whole = b"".join(before) + refusal
        chunks = [whole[: len(whole) - 20], whole[len(whole) - 20 :]]
    result, _ = await opened(protocol, chunks)
    assert result == Overflow(NUMBERS)


@pytest.mark.parametrize(
    ("protocol", "content", "refusal"),
    [(CHAT, [ROLE, TEXT], CHAT_OVERFLOW), (MESSAGES, [START, PING, BLOCK], MESSAGES_OVERFLOW)],
    ids=["chat", "messages"],
)
@pytest.mark.parametrize("together", [False, True], ids=["apart", "together"])
async def test_after_content_everything_read_is_relayed(
    protocol: tuple[Any, Any], content: list[bytes], refusal: bytes, together: bool
) -> None:
    chunks = [b"".join(content) + refusal] if together else [*content, refusal]
    result, reader = await opened(protocol, chunks)
    # The content-less events held, then the content; the overflow only when it came in the same
    # read (it goes to the client as an error event, after the content).
    assert result == b"".join(content) + (refusal if together else b"")
    assert reader.reads == (1 if together else len(content))  # not a read past the first content


@pytest.mark.parametrize(
    ("protocol", "before", "error"),
    [(CHAT, [ROLE], CHAT_OTHER_ERROR), (MESSAGES, [START], message("error", {"type": "error", "error": {}}))],
    ids=["chat", "messages"],
)
async def test_another_error_decides_too(protocol: tuple[Any, Any], before: list[bytes], error: bytes) -> None:
    """An error that is not an overflow is relayed as it came, at once: nothing waits for more."""
    result, reader = await opened(protocol, [*before, error, ROLE])
    assert result == b"".join(before) + error and reader.reads == len(before) + 1


@pytest.mark.parametrize(("protocol", "before"), [(CHAT, [KEEPALIVE, ROLE]), (MESSAGES, [START, PING])])
async def test_a_stream_that_ends_before_content_is_relayed_as_it_came(
    protocol: tuple[Any, Any], before: list[bytes]
) -> None:
    result, _ = await opened(protocol, before)
    assert result == b"".join(before)


async def test_holding_is_bounded() -> None:
    """An upstream that sends only keep-alives is relayed once MAX_HELD bytes are held; a later
    overflow is then relayed, not retried."""
    many = MAX_HELD // len(KEEPALIVE) + 2
    result, reader = await opened(CHAT, [KEEPALIVE] * many + [CHAT_OVERFLOW])
    assert isinstance(result, bytes) and len(result) > MAX_HELD
    assert reader.chunks[-1] == CHAT_OVERFLOW  # never read: the stream was relayed before it


@pytest.mark.parametrize(
    "event",
    [
        chat({"role": "assistant", "content": None, "tool_calls": [{"index": 0, "id": "c1"}]}),
        chat({"reasoning_content": "Let me think"}),
        chat({"role": "assistant"}, finish="stop"),
        chat({"refusal": "I can't"}),
        b"data: [DONE]\n\n",
        b"data: not json\n\n",
    ],
    ids=["tool_call", "reasoning", "finish", "refusal", "done", "not_json"],
)
async def test_what_counts_as_content_in_a_chat_stream(event: bytes) -> None:
    result, _ = await opened(CHAT, [event, CHAT_OVERFLOW])
    assert result == event

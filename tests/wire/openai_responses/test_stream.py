"""A Responses stream as ctxproxy relays it: which events decide an overflow, how it is framed and
how it ends."""

from __future__ import annotations

import orjson

from ctxproxy.errors import UpstreamError
from ctxproxy.upstream.opening import opening_verdict
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.wire.openai_responses.stream import RESPONSES_EVENTS, ResponsesEnd, ResponsesFramer, event_bytes

CREATED = event_bytes({"type": "response.created", "sequence_number": 0, "response": {"id": "r"}})
PROGRESS = event_bytes({"type": "response.in_progress", "sequence_number": 1, "response": {"id": "r"}})
TOO_LONG = {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}
DELTA = event_bytes({"type": "response.output_text.delta", "sequence_number": 2, "delta": "Hi"})
COMPLETED = event_bytes(
    {"type": "response.completed", "sequence_number": 3, "response": {"id": "r", "usage": {"input_tokens": 1234}}}
)


def test_an_overflow_before_output_is_an_overflow_in_either_event() -> None:
    error = event_bytes({"type": "error", "sequence_number": 2, **TOO_LONG, "param": None})
    failed = event_bytes({"type": "response.failed", "sequence_number": 2, "response": {"id": "r", "error": TOO_LONG}})
    for refusal in (error, failed):
        assert isinstance(
            opening_verdict(CREATED + b": keep-alive\n\n" + PROGRESS + refusal, RESPONSES_EVENTS), Overflow
        )
    assert opening_verdict(CREATED + PROGRESS, RESPONSES_EVENTS) is False
    assert opening_verdict(CREATED + DELTA + error, RESPONSES_EVENTS) is True


def test_another_error_is_content_not_an_overflow() -> None:
    other = event_bytes({"type": "error", "sequence_number": 2, "code": "server_error", "message": "boom"})
    assert opening_verdict(CREATED + other, RESPONSES_EVENTS) is True


def test_the_framer_keeps_a_whole_last_event_and_drops_a_half_one() -> None:
    framer = ResponsesFramer()
    assert framer.feed(CREATED + DELTA[:-2]) == CREATED
    assert framer.end() == DELTA
    framer.feed(DELTA[:20])
    assert framer.end() == b""


def test_a_complete_stream_needs_nothing_more_and_reports_its_prompt() -> None:
    end = ResponsesEnd()
    end.see(CREATED + DELTA + COMPLETED)
    assert end.done and end.prompt_tokens == 1234 and end.closing() == b""


def test_a_cut_stream_ends_with_an_error_event_numbered_after_the_last() -> None:
    end = ResponsesEnd()
    end.see(CREATED + DELTA)
    closing = end.closing()
    payload = orjson.loads(closing.split(b"data: ", 1)[1])
    assert closing.startswith(b"event: error\n")
    assert payload["sequence_number"] == 3 and payload["code"] == "upstream_stream_truncated"
    failure = orjson.loads(end.closing(UpstreamError("gone", code="upstream_connection_error")).split(b"data: ")[1])
    assert failure["message"] == "gone" and failure["code"] == "upstream_connection_error"


def test_after_the_upstreams_own_error_nothing_more() -> None:
    end = ResponsesEnd()
    end.see(CREATED + event_bytes({"type": "error", "sequence_number": 1, "code": "server_error", "message": "x"}))
    assert end.failed and end.closing() == b""

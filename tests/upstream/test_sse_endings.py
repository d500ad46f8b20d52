"""The pure half of stream endings: what the framer keeps of an unterminated last event, and the
events that close the client's stream (``StreamEnd``)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.errors import UpstreamUnavailable
from ctxproxy.upstream.sse import DONE, TRUNCATED_CODE, EventFramer, StreamEnd, event_payloads


@pytest.mark.parametrize(
    ("tail", "kept"),
    [
        (b"data: [DONE]", b"data: [DONE]\n\n"),  # only the blank line was missing
        (b"data: [DONE]\n", b"data: [DONE]\n\n"),
        (b'data: {"a": 1}\r\n', b'data: {"a": 1}\n\n'),
        (b'data: {"a": ', b""),  # cut in the middle of the event
        (b"data: [DO", b""),
        (b": keep-alive\n", b""),  # no data: nothing to relay
        (b"", b""),
    ],
)
def test_end_keeps_only_a_whole_last_event(tail: bytes, kept: bytes) -> None:
    framer = EventFramer()
    assert framer.feed(b'data: {"n": 1}\n\n' + tail) == b'data: {"n": 1}\n\n'
    assert framer.end() == kept
    assert framer.end() == b""  # and it is gone


def test_closing_after_done_is_nothing() -> None:
    end = StreamEnd()
    end.see(b'data: {"choices": []}\n\ndata: [DONE]\n\n')
    assert end.closing() == b""
    assert end.closing(UpstreamUnavailable("gone")) == b""  # a failure after [DONE] changes nothing


def test_closing_after_an_upstream_error_event_is_done() -> None:
    end = StreamEnd()
    end.see(b'data: {"error": {"message": "overloaded"}}\n\n')
    assert end.closing() == DONE


def test_closing_a_stream_without_done_says_it_was_truncated() -> None:
    end = StreamEnd()
    end.see(b'data: {"choices": [{"delta": {"content": "\\"error\\": not an error"}}]}\n\n')
    closing = event_payloads(end.closing())
    assert orjson.loads(closing[0])["error"]["code"] == TRUNCATED_CODE and closing[1:] == [b"[DONE]"]


def test_closing_after_a_transport_failure_names_it() -> None:
    closing = event_payloads(StreamEnd().closing(UpstreamUnavailable("The upstream closed the connection.")))
    error = orjson.loads(closing[0])["error"]
    assert (error["code"], error["type"]) == ("upstream_connection_error", "upstream_error")
    assert closing[1:] == [b"[DONE]"]


_EVENTS = [
    b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n',
    b"data: [DONE]\n\n",
    b"data:  [DONE] \r\n\r\n",
    b'data: {"error": {"message": "boom"}}\n\n',
    b'data: {"choices": [{"delta": {"content": "\\"error\\" [DONE]"}}]}\n\n',
    b"data: [DONE\n\n",
    b": keep-alive\n\n",
    b'data: {"err\n\n',
]


@given(st.lists(st.sampled_from(_EVENTS), max_size=5))
def test_see_finds_what_reading_every_payload_finds(events: list[bytes]) -> None:
    chunk = b"".join(events)
    end, reference = StreamEnd(), StreamEnd()
    end.see(chunk)
    for payload in event_payloads(chunk):  # what ``see`` did before it skipped chunks saying neither
        reference.see_payload(payload)
    assert (end.done, end.failed) == (reference.done, reference.failed)


@given(st.lists(st.sampled_from(_EVENTS), max_size=6), st.lists(st.integers(0, 400), max_size=6))
def test_the_framer_releases_every_whole_event_however_the_bytes_are_cut(events: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(events) + b"data: {"  # and an unfinished event, held to the end
    framer, released, at = EventFramer(), b"", 0
    for cut in sorted({min(c, len(stream)) for c in cuts}) + [len(stream)]:
        released += framer.feed(stream[at:cut])
        at = cut
    assert released == b"".join(events)
    assert framer.end() == b""

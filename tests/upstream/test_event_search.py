"""Reading a stream's events by searching, not splitting: ``sse.event_span`` finds the event
``iter_events`` would cut around a byte, and the usage tap and ``StreamEnd`` that use it give what
reading every event gave, however the stream's bytes are cut into reads."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxproxy.upstream.sse import EventFramer, StreamEnd, event_payloads, event_span, iter_events, sse_event
from ctxproxy.upstream.usage import UsageTap

_USAGE = b'{"choices":[],"usage":{"prompt_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}'
_EVENTS = [
    b'data: {"choices":[{"delta":{"content":"hi"}}],"usage":null}\n\n',
    b"data: " + _USAGE % (1234, 0) + b"\n\n",
    b"data: " + _USAGE % (77, 70) + b"\r\n\r\n",
    b"data: " + _USAGE % (55, 0) + b"\r\r",
    b"\ndata: " + _USAGE % (9, 0) + b"\n\n\n",  # odd runs of line breaks
    b"data: " + _USAGE % (8, 0) + b"\r\n\n",
    b'data: {"choices":[{"delta":{"content":"x"}}],"usage":{"prompt_tokens":66}}\n\n',  # read, kept
    b'data: {"choices":[],\ndata: "usage":{"prompt_tokens":44}}\n\n',  # two data lines
    b'event: x\ndata: {"usage":{"prompt_tokens":33}}\n\n',
    b'data: {"usage":{"prompt_tokens":"1"}}\n\n',
    b": keep-alive\n\n",
    b'data: {"error": {"message": "boom"}}\n\n',
    b'data: {"error": 1}\n\r',
    b"data: [DONE]\n\n",
    b"data:  [DONE] \r\n\r\n",
    b"data: [DONE\r\n",
    b"data:\ndata: [DONE]\n\n\n\n",
    b'data: {"choices": [{"delta": {"content": "\\"error\\" [DONE]"}}]}\n\n',
    b'data: {"prompt_tokens"',  # an unfinished event
    b"\r",
    b"\n",
]
_STREAMS = st.lists(st.sampled_from(_EVENTS), max_size=8)
_CUTS = st.lists(st.integers(0, 600), max_size=8)


def _reads(stream: bytes, cuts: list[int]) -> list[bytes]:
    ends = sorted({min(cut, len(stream)) for cut in cuts}) + [len(stream)]
    return [stream[start:end] for start, end in zip([0, *ends], ends, strict=False)]


def _spans(events: bytes) -> list[tuple[int, int]]:
    spans, at = [], 0
    for event in iter_events(events):
        spans.append((at, at + len(event)))
        at += len(event)
    return spans


@given(st.binary(max_size=40).map(lambda b: bytes(b"\r\n\na"[x % 4] for x in b)))
def test_the_span_around_a_byte_is_the_event_iter_events_cuts(events: bytes) -> None:
    spans = _spans(events)
    for at, byte in enumerate(events):
        if byte not in b"\r\n":
            expected = next(((start, end) for start, end in spans if start <= at < end), None)
            assert event_span(events, at) == expected


def _tapped_by_reading_every_event(tap: UsageTap, events: bytes) -> bytes:
    """What ``UsageTap.events`` gave when it cut every event of ``events`` apart."""
    kept, at = [], 0
    for event in iter_events(events):
        at += len(event)
        if b'"prompt_tokens"' not in event or not tap._usage_only(event):
            kept.append(event)
    kept.append(events[at:])
    return b"".join(kept)


def _tap_state(tap: UsageTap) -> tuple[object, ...]:
    return tap.prompt_tokens, tap.prompt_tokens_partial, tap.cached_tokens


@given(_STREAMS, _CUTS, st.booleans())
def test_the_tap_relays_and_reads_what_reading_every_event_did(
    events: list[bytes], cuts: list[int], strip: bool
) -> None:
    framer, reference_framer = EventFramer(), EventFramer()
    tap, reference = UsageTap(strip=strip), UsageTap(strip=strip)
    relayed, expected = b"", b""
    for read in _reads(b"".join(events), cuts):
        relayed += tap.events(framer.feed(read))
        expected += _tapped_by_reading_every_event(reference, reference_framer.feed(read))
        assert _tap_state(tap) == _tap_state(reference)  # as soon as its read arrived
    relayed += tap.events(framer.end())
    expected += _tapped_by_reading_every_event(reference, reference_framer.end())
    assert relayed == expected and _tap_state(tap) == _tap_state(reference)


@given(_STREAMS, _CUTS)
def test_the_end_sees_what_reading_every_payload_saw(events: list[bytes], cuts: list[int]) -> None:
    end, reference = StreamEnd(), StreamEnd()
    for read in _reads(b"".join(events), cuts):
        end.see(read)
        for payload in event_payloads(read):
            reference.see_payload(payload)
        assert (end.done, end.failed) == (reference.done, reference.failed)


def _payloads_of_every_event(events: bytes) -> list[bytes]:
    """What ``event_payloads`` gave when it split every read: each event's data lines, joined."""
    payloads = []
    for event in events.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n\n"):
        lines = [line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        payloads += [b"\n".join(lines)] if lines else []
    return payloads


@given(_STREAMS)
def test_the_payloads_of_one_event_are_read_as_those_of_many(events: list[bytes]) -> None:
    assert event_payloads(b"".join(events)) == _payloads_of_every_event(b"".join(events))
    for event in events:  # each read alone
        assert event_payloads(event) == _payloads_of_every_event(event)
    for payload in _payloads_of_every_event(b"".join(events)):
        assert event_payloads(sse_event(payload)) == [payload]

"""Reading ``usage.prompt_tokens``, asking a stream for it, and taking the chunk out again."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from ctxproxy.upstream.sse import event_payloads
from ctxproxy.upstream.usage import UsageTap, ask_for_usage

CHUNK = b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}\n\n'
USAGE = (
    b'data: {"id":"c","object":"chat.completion.chunk","choices":[],'
    b'"usage":{"prompt_tokens":1234,"completion_tokens":5,"total_tokens":1239}}\n\n'
)
DONE = b"data: [DONE]\n\n"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"model": "m", "stream": True}, {"include_usage": True}),
        ({"model": "m", "stream_options": {"include_usage": False}}, {"include_usage": True}),
        ({"model": "m", "stream_options": {"other": 1}}, {"other": 1, "include_usage": True}),
        ({"model": "m", "stream_options": None}, {"include_usage": True}),
    ],
)
def test_asking_for_usage_keeps_the_body_and_sets_include_usage(body: dict[str, Any], expected: Any) -> None:
    raw = b"  \n" + orjson.dumps(body)
    asked = orjson.loads(bytes(ask_for_usage(raw, body)))
    assert asked["stream_options"] == expected
    assert {k: v for k, v in asked.items() if k != "stream_options"} == {
        k: v for k, v in body.items() if k != "stream_options"
    }


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b' \n{"model":"m","stream":true}', b' \n{"stream_options":{"include_usage":true},"model":"m","stream":true}'),
        (b"{ }", b'{"stream_options":{"include_usage":true} }'),
    ],
)
def test_asking_for_usage_inserts_the_option_and_keeps_every_other_byte(raw: bytes, expected: bytes) -> None:
    assert bytes(ask_for_usage(raw, orjson.loads(raw))) == expected


def test_the_usage_chunk_is_read_and_taken_out_when_ctxproxy_asked() -> None:
    tap = UsageTap(strip=True)
    relayed = tap.events(CHUNK) + tap.events(USAGE + DONE)
    assert relayed == CHUNK + DONE and tap.prompt_tokens == 1234


def test_a_client_that_asked_keeps_its_chunk() -> None:
    tap = UsageTap(strip=False)
    assert tap.events(CHUNK + USAGE + DONE) == CHUNK + USAGE + DONE and tap.prompt_tokens == 1234


def test_usage_inside_a_content_chunk_is_read_but_the_chunk_stays() -> None:
    chunk = CHUNK.replace(b'"usage":null', b'"usage":{"prompt_tokens":77}')
    tap = UsageTap(strip=True)
    assert tap.events(chunk) == chunk and tap.prompt_tokens == 77


@pytest.mark.parametrize("ending", [b"\r\n\r\n", b"\r\r"])
def test_other_line_endings_frame_the_same(ending: bytes) -> None:
    events = (CHUNK + USAGE + DONE).replace(b"\n\n", ending)
    tap = UsageTap(strip=True)
    assert event_payloads(tap.events(events)) == event_payloads(CHUNK + DONE)


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": "1234"},
        {"prompt_tokens": True},
        {"prompt_tokens": -3},
        {"prompt_tokens": 0},
        {"prompt_tokens": 10**12},
        "1234",
        None,
    ],
)
def test_implausible_numbers_are_ignored(usage: object) -> None:
    tap = UsageTap()
    tap.see_json(orjson.dumps({"usage": usage, "prompt_tokens": 5}))
    assert tap.prompt_tokens is None


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 800}},
        {"prompt_tokens": 900, "cache_read_input_tokens": 800},
    ],
)
def test_cached_prompts_are_marked(usage: dict[str, Any]) -> None:
    tap = UsageTap()
    tap.see_json(orjson.dumps({"usage": usage}))
    assert tap.prompt_tokens == 900 and tap.prompt_tokens_partial


def test_a_body_that_is_not_json_is_ignored() -> None:
    tap = UsageTap()
    tap.see_json(b'{"usage": {"prompt_tokens": 5')
    assert tap.prompt_tokens is None


@pytest.mark.parametrize(
    ("usage", "cached"),
    [
        ({"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 768}}, 768),  # OpenAI
        ({"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 0}}, 0),  # a miss is a report too
        ({"prompt_tokens": 900, "prompt_cache_hit_tokens": 512, "prompt_cache_miss_tokens": 388}, 512),  # DeepSeek
        ({"prompt_tokens": 900}, None),  # a server that says nothing of a cache
        ({"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": "768"}}, None),
        ({"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": True}}, None),
    ],
)
def test_the_cached_part_of_the_prompt_is_read_for_pricing(usage: dict[str, Any], cached: int | None) -> None:
    tap = UsageTap()
    tap.see_json(orjson.dumps({"object": "chat.completion", "usage": usage}))
    assert tap.prompt_tokens == 900 and tap.cached_tokens == cached

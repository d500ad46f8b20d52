from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from ctxproxy.tokens import FALLBACK_ENCODING, TOKENS_PER_MESSAGE, TokenCounter, TokenSettings, encoding_name_for
from ctxproxy.vocabulary import ROLES

REPO_ROOT = Path(__file__).resolve().parents[1]


def digest(message: Any) -> bytes:
    return hashlib.blake2b(repr(message).encode()).digest()


def digests(messages: Sequence[Any]) -> list[bytes]:
    return [digest(m) for m in messages]


@pytest.fixture(scope="module")
def offline() -> tiktoken.Encoding:
    return tiktoken.get_encoding(FALLBACK_ENCODING)


@pytest.fixture
def counter() -> TokenCounter:
    return TokenCounter()


def count(counter: TokenCounter, message: Mapping[str, Any]) -> int:
    return counter.count_message(message, digest(message))


# --- 1. offline, with the network blocked ----------------------------------------------------

SAMPLES = ["hello world", "The quick brown fox jumps over the lazy dog.", "x <|endoftext|> y", ""]

_OFFLINE_SCRIPT = textwrap.dedent(
    """
    import json, os, socket, sys

    attempts = []

    def blocked(*args, **kwargs):
        attempts.append(1)
        raise OSError("network disabled in test")

    socket.socket.connect = blocked
    socket.create_connection = blocked
    socket.getaddrinfo = blocked
    os.environ["TIKTOKEN_CACHE_DIR"] = sys.argv[1]

    from ctxproxy.tokens import TokenCounter, TokenSettings

    samples = json.loads(sys.argv[2])
    counter = TokenCounter(TokenSettings())
    result = {
        "gpt-4o": [counter.count_text(s, "gpt-4o") for s in samples],
        "unknown": [counter.count_text(s, "acme/llama-9-mega") for s in samples],
        "attempts_offline": len(attempts),
    }
    downloading = TokenCounter(TokenSettings(allow_download=True))
    result["download_gpt-4o"] = [downloading.count_text(s, "gpt-4o") for s in samples]
    result["download_encoding"] = downloading.encoding_for("gpt-4o").name
    result["attempts_download"] = len(attempts)
    print(json.dumps(result))
    """
)


def test_counts_offline_with_network_blocked(tmp_path: Path, offline: tiktoken.Encoding) -> None:
    cache_dir = tmp_path / "tiktoken-cache"
    cache_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("DATA_GYM_CACHE_DIR", None)
    proc = subprocess.run(
        [sys.executable, "-c", _OFFLINE_SCRIPT, str(cache_dir), json.dumps(SAMPLES)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])

    expected = [len(offline.encode_ordinary(s)) for s in SAMPLES]
    assert expected[0] == 2  # "hello world" in cl100k
    assert result["gpt-4o"] == expected
    assert result["unknown"] == expected
    assert result["attempts_offline"] == 0  # the default settings never touch the network
    # allow_download: o200k_base cannot be fetched, so it falls back to the offline cl100k
    assert result["attempts_download"] >= 1
    assert result["download_encoding"] == FALLBACK_ENCODING
    assert result["download_gpt-4o"] == expected
    assert "tokens.encoding_fallback" in proc.stdout + proc.stderr
    assert not list(cache_dir.glob("*o200k*"))


# --- 2. model -> encoding --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o1-mini", "o200k_base"),
        ("o3", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("gpt-oss-120b", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("azure/gpt-4.1", "o200k_base"),
        ("OpenAI/GPT-4o", "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc123", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("azure/gpt-35-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("text-embedding-ada-002", "cl100k_base"),
        ("claude-3-5-sonnet", "cl100k_base"),
        ("meta-llama/Llama-3.1-8B-Instruct", "cl100k_base"),
        ("qwen2.5-72b", "cl100k_base"),
        ("", "cl100k_base"),
        (None, "cl100k_base"),
    ],
)
def test_encoding_name_for(model: str | None, expected: str) -> None:
    assert encoding_name_for(model) == expected


def test_default_settings_always_use_offline_encoding(counter: TokenCounter) -> None:
    for model in ("gpt-4o", "gpt-4", "claude-3-opus", None):
        assert counter.encoding_for(model).name == FALLBACK_ENCODING


def test_download_failure_is_logged_once_and_memoised(monkeypatch: pytest.MonkeyPatch) -> None:
    requested: list[str] = []

    def failing(name: str) -> tiktoken.Encoding:
        requested.append(name)
        raise ConnectionError("no network")

    counter = TokenCounter(TokenSettings(allow_download=True))
    monkeypatch.setattr(tiktoken, "get_encoding", failing)
    with capture_logs() as logs:
        first = counter.count_text("hello world", "gpt-4o")
        second = counter.count_text("hello world", "openai/o3-mini")
        assert counter.encoding_for("claude-3").name == FALLBACK_ENCODING
    assert first == second == 2
    assert requested == ["o200k_base"]  # not retried; cl100k models never download
    assert logs == [
        {
            "event": "tokens.encoding_fallback",
            "model": "gpt-4o",
            "encoding": "o200k_base",
            "error": "ConnectionError",
            "log_level": "warning",
        }
    ]


def test_native_encoding_loaded_once_and_keys_the_cache(
    monkeypatch: pytest.MonkeyPatch, offline: tiktoken.Encoding
) -> None:
    native = tiktoken.Encoding(
        name="o200k_base",
        pat_str=offline._pat_str,
        mergeable_ranks=offline._mergeable_ranks,
        special_tokens=offline._special_tokens,
    )
    requested: list[str] = []

    def fake_get_encoding(name: str) -> tiktoken.Encoding:
        requested.append(name)
        return native

    counter = TokenCounter(TokenSettings(allow_download=True))
    monkeypatch.setattr(tiktoken, "get_encoding", fake_get_encoding)
    assert counter.encoding_for("gpt-4o") is native
    assert counter.encoding_for("gpt-5") is native
    assert requested == ["o200k_base"]

    message = {"role": "user", "content": "hi"}
    counter.count_message(message, b"same", "gpt-4o")
    counter.count_message(message, b"same", "claude-3")  # other encoding -> other key
    assert counter.cache_info == (0, 2, 2)


def test_count_text_special_tokens_are_plain_text(counter: TokenCounter, offline: tiktoken.Encoding) -> None:
    text = "before <|endoftext|> after <|fim_prefix|>"
    assert counter.count_text(text) == len(offline.encode_ordinary(text)) > 4
    assert counter.count_text("") == 0


# --- 3. message rules ------------------------------------------------------------------------


def test_message_rules_match_cookbook(counter: TokenCounter, offline: tiktoken.Encoding) -> None:
    def n(text: str) -> int:
        return len(offline.encode_ordinary(text))

    message = {"role": "user", "content": "hello world"}
    assert count(counter, message) == 3 + n("user") + n("hello world")
    named = {**message, "name": "alice_smith"}
    assert count(counter, named) == count(counter, message) + n("alice_smith") + 1
    assert count(counter, {"role": "assistant", "content": None}) == 3 + n("assistant")


def test_string_content_equals_single_text_part(counter: TokenCounter) -> None:
    text = "Summarise the following paragraph in one sentence, please."
    as_string = {"role": "user", "content": text}
    as_parts = {"role": "user", "content": [{"type": "text", "text": text}]}
    assert count(counter, as_string) == count(counter, as_parts)
    two_parts = {"role": "user", "content": [{"type": "text", "text": text}] * 2}
    assert count(counter, two_parts) > count(counter, as_parts)


@pytest.mark.parametrize(
    ("detail", "setting"),
    [
        ("low", "image_tokens_low"),
        ("high", "image_tokens_high"),
        ("auto", "image_tokens_high"),
        (None, "image_tokens_high"),
    ],
)
def test_image_part_uses_settings(detail: str | None, setting: str) -> None:
    settings = TokenSettings(image_tokens_low=11, image_tokens_high=997)
    counter = TokenCounter(settings)
    text = {"type": "text", "text": "What is in this picture?"}
    image_url: dict[str, Any] = {"url": "https://example.com/cat.png"}
    if detail is not None:
        image_url["detail"] = detail
    without = {"role": "user", "content": [text]}
    with_image = {"role": "user", "content": [text, {"type": "image_url", "image_url": image_url}]}
    assert count(counter, with_image) == count(counter, without) + getattr(settings, setting)


def test_huge_data_url_image_is_not_tokenized(counter: TokenCounter) -> None:
    payload = base64.b64encode(os.urandom(600_000)).decode()

    def image(url: str) -> dict[str, Any]:
        part = {"type": "image_url", "image_url": {"url": url, "detail": "high"}}
        return {"role": "user", "content": [part]}

    short = count(counter, image("https://example.com/a.png"))
    huge = count(counter, image(f"data:image/png;base64,{payload}"))
    assert huge == short == 3 + 1 + 765


def test_tool_calls_are_counted(counter: TokenCounter, offline: tiktoken.Encoding) -> None:
    def assistant(arguments: str) -> dict[str, Any]:
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": arguments},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    short_args = '{"city": "Paris"}'
    base = count(counter, {"role": "assistant", "content": None})
    call_tokens = 3 + len(offline.encode_ordinary("get_weather")) + len(offline.encode_ordinary(short_args))
    assert count(counter, assistant(short_args)) == base + call_tokens
    longer = '{"city": "Paris", "unit": "celsius", "days": 7, "hourly": true}'
    assert count(counter, assistant(longer)) > count(counter, assistant(short_args))
    legacy = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "get_weather", "arguments": short_args},
    }
    assert count(counter, legacy) == base + call_tokens


def test_tool_message_counts_tool_call_id(counter: TokenCounter, offline: tiktoken.Encoding) -> None:
    plain = {"role": "tool", "content": '{"temp": 21}'}
    with_id = {**plain, "tool_call_id": "call_abc123XYZ"}
    assert count(counter, with_id) == count(counter, plain) + len(offline.encode_ordinary("call_abc123XYZ"))


def test_refusal_and_reasoning_fields(counter: TokenCounter, offline: tiktoken.Encoding) -> None:
    plain = {"role": "assistant", "content": "ok"}
    extra = {**plain, "refusal": "I can't help", "reasoning_content": "Thinking hard"}
    expected = len(offline.encode_ordinary("I can't help")) + len(offline.encode_ordinary("Thinking hard"))
    assert count(counter, extra) == count(counter, plain) + expected
    part = {"type": "refusal", "refusal": "I can't help"}
    as_part = {"role": "assistant", "content": [part]}
    as_string = {"role": "assistant", "content": "I can't help"}
    assert count(counter, as_part) == count(counter, as_string)


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": 42},
        {"role": "user", "content": {"unexpected": "dict", "n": [1, 2, 3]}},
        {"role": "user", "content": [1, None, "loose string", {"no_type": True}]},
        {"role": 7, "name": ["x"], "content": [{"type": "text", "text": 5}]},
        {"role": "assistant", "tool_calls": "not a list", "function_call": 3},
        {"role": "assistant", "tool_calls": [None, {"function": "str"}, {"type": "custom"}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": "https://x/y.png"}]},
        {"role": "user", "content": [{"type": "input_audio", "input_audio": None}]},
        {"role": "user", "content": [{"type": "file", "file": "oops"}]},
        {"role": "user", "content": {1: b"bytes", 2: 10**40}},
    ],
)
def test_malformed_messages_never_raise(counter: TokenCounter, message: dict[str, Any]) -> None:
    result = count(counter, message)
    assert isinstance(result, int) and result > 3


def test_non_mapping_message_never_raises(counter: TokenCounter) -> None:
    weird: Any = ["role", "user"]
    assert counter.count_message(weird, b"weird") > 3


def test_input_audio_estimate_grows_with_size(counter: TokenCounter) -> None:
    def audio(n_bytes: int) -> dict[str, Any]:
        data = base64.b64encode(b"\0" * n_bytes).decode()
        part = {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}
        return {"role": "user", "content": [part]}

    empty = count(counter, {"role": "user", "content": []})
    assert count(counter, audio(0)) == empty + 1  # minimum 1
    assert count(counter, audio(48_000)) == empty + 30  # 3 s at 16 kB/s, 10 tokens/s
    assert count(counter, audio(96_000)) == empty + 60
    assert count(counter, audio(96_003)) == empty + 61  # rounded up


def test_file_part_estimate(counter: TokenCounter, offline: tiktoken.Encoding) -> None:
    data = "data:application/pdf;base64," + base64.b64encode(b"%" * 30_000).decode()
    part = {"type": "file", "file": {"filename": "report.pdf", "file_data": data}}
    empty = count(counter, {"role": "user", "content": []})
    expected = len(offline.encode_ordinary("report.pdf")) + -(-len(data) * 3 // 16)
    assert count(counter, {"role": "user", "content": [part]}) == empty + expected


def test_unknown_part_json_with_blob_estimate(counter: TokenCounter) -> None:
    blob = base64.b64encode(os.urandom(30_000)).decode()  # 40_000 chars -> 10_000 tokens
    small = {"type": "video", "video": {"data": "", "format": "mp4"}}
    large = {"type": "video", "video": {"data": blob, "format": "mp4"}}
    base = count(counter, {"role": "user", "content": [small]})
    assert count(counter, {"role": "user", "content": [large]}) == base + 10_000
    prose = {"type": "custom", "text": "word " * 50}
    assert count(counter, {"role": "user", "content": [prose]}) > base


# --- 4. cache --------------------------------------------------------------------------------


def conversation(n: int) -> list[dict[str, Any]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": f"message number {i}"} for i in range(n)]


def test_second_pass_is_all_hits(counter: TokenCounter) -> None:
    messages = conversation(10)
    first = counter.count_messages(messages, digests(messages), "gpt-4o")
    assert counter.cache_info == (0, 10, 10)
    second = counter.count_messages(messages, digests(messages), "gpt-4o")
    assert second == first
    assert counter.cache_info == (10, 10, 10)


def test_only_new_or_changed_messages_miss(counter: TokenCounter) -> None:
    messages = conversation(6)
    counter.count_messages(messages, digests(messages))
    hits, misses, _ = counter.cache_info
    changed = [*messages[:-1], {"role": "assistant", "content": "edited"}, *conversation(8)[6:]]
    counter.count_messages(changed, digests(changed))
    new_hits, new_misses, size = counter.cache_info
    assert (new_hits - hits, new_misses - misses) == (5, 3)
    assert size == 9


def test_lru_bound_and_eviction_order() -> None:
    counter = TokenCounter(TokenSettings(cache_size=3))
    messages = conversation(8)
    for m in messages:
        counter.count_message(m, digest(m))
        assert counter.cache_info[2] <= 3
    assert counter.cache_info == (0, 8, 3)
    counter.count_message(messages[5], digest(messages[5]))  # hit: now most recent
    counter.count_message(messages[0], digest(messages[0]))  # evicted earlier: miss
    assert counter.cache_info == (1, 9, 3)
    counter.count_message(messages[5], digest(messages[5]))  # survived the eviction
    assert counter.cache_info == (2, 9, 3)


def test_cache_size_zero_disables_cache() -> None:
    counter = TokenCounter(TokenSettings(cache_size=0))
    message = {"role": "user", "content": "hi"}
    assert counter.count_message(message, b"d") == counter.count_message(message, b"d")
    assert counter.cache_info == (0, 2, 0)


def test_settings_reject_negative_values() -> None:
    with pytest.raises(ValueError, match="cache_size"):
        TokenSettings(cache_size=-1)


# --- 5. totals and tools ---------------------------------------------------------------------


def test_count_messages_is_sum_plus_priming(counter: TokenCounter) -> None:
    messages = conversation(5)
    expected = sum(counter.count_message(m, digest(m)) for m in messages) + 3
    assert counter.count_messages(messages, digests(messages)) == expected
    assert counter.count_messages([], []) == 3
    with pytest.raises(ValueError):
        counter.count_messages(messages, digests(messages)[:-1])


def test_count_tools(counter: TokenCounter, offline: tiktoken.Encoding) -> None:
    def tool(name: str) -> dict[str, Any]:
        params = {"type": "object", "properties": {"city": {"type": "string"}}}
        return {"type": "function", "function": {"name": name, "parameters": params}}

    assert counter.count_tools(None) == 0
    assert counter.count_tools([]) == 0
    one = counter.count_tools([tool("get_weather")])
    compact = json.dumps([tool("get_weather")], separators=(",", ":"))
    assert one == len(offline.encode_ordinary(compact))
    two = counter.count_tools([tool("get_weather"), tool("get_time")])
    assert two > one > 0


def test_tools_are_counted_once_and_kept_under_their_text() -> None:
    """The same definitions sent again (parsed anew: other objects) are found in the cache, which
    accounts for the text it keeps them under; other definitions are counted anew."""
    counter = TokenCounter()
    tools = [{"type": "function", "function": {"name": "f", "description": "does things " * 400}}]
    before = counter.cache_bytes
    first = counter.count_tools(tools)
    held, kept = len(counter._cache), counter.cache_bytes
    assert kept - before >= len(json.dumps(tools))
    assert counter.count_tools(json.loads(json.dumps(tools))) == first
    assert (len(counter._cache), counter.cache_bytes) == (held, kept)
    other = [{"type": "function", "function": {"name": "g", "description": "does things " * 400}}]
    assert counter.count_tools(other) == first and len(counter._cache) == held + 1


def test_the_same_tools_object_is_answered_without_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared object counted lately (a body that goes on shares its ``tools``) is not written
    as text again; an equal object is (it may differ from the next), few objects are held, and
    definitions not shared (ctxproxy's own, made for each request) are neither held nor answered so."""
    import ctxproxy.tokens as tokens

    others = [[{"name": f"g{i}"}] for i in range(10)]
    want = [TokenCounter().count_tools(other) for other in others]
    ours = [{"name": "recall_page"}]
    ours_want = TokenCounter().count_tools(ours)
    written: list[int] = []
    real = tokens._json_text
    monkeypatch.setattr(tokens, "_json_text", lambda value: written.append(1) or real(value))
    counter = TokenCounter()
    tools = [{"type": "function", "function": {"name": "f", "description": "does things " * 40}}]
    first = counter.count_tools(tools, shared=True)
    assert counter.count_tools(tools, shared=True) == first and len(written) == 1
    assert counter.count_tools(json.loads(json.dumps(tools)), shared=True) == first and len(written) == 2
    assert [counter.count_tools(other, shared=True) for other in others] == want
    assert len(counter._tools_seen) <= 4  # held: a few
    assert counter.count_tools(others[-1], shared=True) == want[-1] and len(written) == 12
    assert counter.count_tools(tools, shared=True) == first and len(written) == 13  # forgotten: written again
    held = len(counter._tools_seen)
    assert counter.count_tools(tools) == first and len(written) == 14  # not shared: written, though held
    assert counter.count_tools(ours) == ours_want and len(written) == 15
    assert len(counter._tools_seen) == held and counter.count_tools(tools, shared=True) == first and len(written) == 15


# --- a message's count with its role's tokens kept, against the count made field by field ----------

_ROLE = st.one_of(st.sampled_from([*ROLES, "User", "robot", ""]), st.none(), st.integers(), st.lists(st.text()))
_FIELD = st.one_of(st.none(), st.text(max_size=30), st.integers(), st.lists(st.text(max_size=5), max_size=3))


def _counted_field_by_field(enc: Any, message: Mapping[str, Any], settings: TokenSettings) -> int:
    """``_message_tokens`` as it was before a role's tokens were kept: every field counted anew."""
    from ctxproxy.tokens import (
        TOKENS_PER_NAME,
        _content_tokens,
        _function_tokens,
        _tool_calls_tokens,
        _value_tokens,
    )

    total = TOKENS_PER_MESSAGE + _value_tokens(enc, message.get("role"))
    if message.get("name") is not None:
        total += _value_tokens(enc, message["name"]) + TOKENS_PER_NAME
    total += _content_tokens(enc, message.get("content"), settings)
    if message.get("tool_calls") is not None:
        total += _tool_calls_tokens(enc, message["tool_calls"])
    if message.get("function_call") is not None:
        total += _function_tokens(enc, message["function_call"])
    for field in ("tool_call_id", "refusal", "reasoning_content"):
        total += _value_tokens(enc, message.get(field))
    return total


@settings(max_examples=200, deadline=None)
@given(_ROLE, _FIELD, _FIELD, _FIELD, _FIELD, st.sampled_from([None, "gpt-4o", "gpt-3.5-turbo"]))
def test_a_message_counts_as_counted_field_by_field(
    role: Any, content: Any, tool_call_id: Any, refusal: Any, reasoning: Any, model: str | None
) -> None:
    from ctxproxy.tokens import _message_tokens

    counter = TokenCounter()
    enc = counter.encoding_for(model)
    message = {"role": role, "content": content, "tool_call_id": tool_call_id, "refusal": refusal}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    for _ in range(2):  # the role's tokens counted, then kept
        assert _message_tokens(enc, message, counter.settings) == _counted_field_by_field(
            enc, message, counter.settings
        )

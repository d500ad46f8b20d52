"""Bad input gets an OpenAI-shaped 400 / 413 that says what to fix; nothing is forwarded."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from tests.conftest import Proxy, Upstream

USER = {"role": "user", "content": "hi"}

CASES = [
    # (raw body, status, param, words the message must contain)
    (b"{not json", 400, None, "not valid JSON"),
    (b"", 400, None, "empty"),
    (b"[1, 2]", 400, None, "must be a JSON object"),
    (b'"text"', 400, None, "must be a JSON object"),
    (orjson.dumps({"model": "m"}), 400, "messages", "`messages` is required"),
    (orjson.dumps({"model": "m", "messages": {"role": "user"}}), 400, "messages", "must be a list"),
    (orjson.dumps({"model": "m", "messages": []}), 400, "messages", "at least one"),
    (orjson.dumps({"model": "m", "messages": ["hi"]}), 400, "messages[0]", "must be an object"),
    (orjson.dumps({"model": "m", "messages": [{"content": "x"}]}), 400, "messages[0].role", "missing"),
    (orjson.dumps({"model": "m", "messages": [{"role": "robot", "content": "x"}]}), 400, "messages[0].role", "'robot'"),
    (
        orjson.dumps({"model": "m", "messages": [USER, {"role": "user", "content": 5}]}),
        400,
        "messages[1].content",
        "string or a list",
    ),
    (orjson.dumps({"model": "m", "messages": [{"role": "user"}]}), 400, "messages[0].content", "required"),
    (
        orjson.dumps({"model": "m", "messages": [{"role": "user", "content": [{"text": "x"}]}]}),
        400,
        "messages[0].content[0]",
        "`type`",
    ),
    (
        orjson.dumps({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}),
        400,
        "messages[0].content[0].text",
        "string",
    ),
    (
        orjson.dumps(
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}
        ),
        400,
        "messages[0].content[0].image_url.url",
        "string",
    ),
    (
        orjson.dumps(
            {
                "model": "m",
                "messages": [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
            }
        ),
        400,
        "messages[0].content[0]",
        "text part",
    ),
    (
        orjson.dumps({"model": "m", "messages": [{"role": "tool", "content": "r"}]}),
        400,
        "messages[0].tool_call_id",
        "tool_call_id",
    ),
    (
        orjson.dumps(
            {"model": "m", "messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}]}
        ),
        400,
        "messages[0].tool_calls[0]",
        "`function`",
    ),
    (
        orjson.dumps(
            {
                "model": "m",
                "messages": [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}],
                    }
                ],
            }
        ),
        400,
        "messages[0].tool_calls[0].function",
        "arguments",
    ),
    (
        orjson.dumps({"model": "m", "messages": [{"role": "assistant", "content": None}]}),
        400,
        "messages[0].content",
        "tool_calls",
    ),
    (
        orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x", "tool_calls": []}]}),
        400,
        "messages[0].tool_calls",
        "assistant",
    ),
    (orjson.dumps({"model": 4, "messages": [USER]}), 400, "model", "string"),
    (orjson.dumps({"model": "m", "messages": [USER], "stream": "yes"}), 400, "stream", "true or false"),
    (orjson.dumps({"model": "m", "messages": [USER], "user": 7}), 400, "user", "string"),
]


@pytest.mark.parametrize(("raw", "status", "param", "words"), CASES)
async def test_bad_body_rejected(
    proxy: Proxy, upstream: Upstream, raw: bytes, status: int, param: str | None, words: str
) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url("/v1/chat/completions"), data=raw, headers={"Content-Type": "application/json"}
        ) as resp:
            assert resp.status == status
            error = (await resp.json())["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert words in error["message"]
    assert upstream.fake.chat_requests() == []
    # ... and the process keeps serving.
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json={"model": "m", "messages": [USER]}) as resp:
            assert resp.status == 200


async def test_valid_edge_shapes_accepted(proxy: Proxy, upstream: Upstream) -> None:
    messages = [
        {"role": "developer", "content": [{"type": "text", "text": "rules"}]},
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]},
        {"role": "assistant", "content": None, "refusal": "no"},
        {"role": "user", "content": "go on", "name": "bob"},
    ]
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json={"model": "m", "messages": messages}) as resp:
            assert resp.status == 200
    assert len(upstream.fake.chat_requests()) == 1


async def test_body_over_limit_is_413_without_reading_it(make_proxy, upstream: Upstream) -> None:
    proxy = await make_proxy(proxy_toml="[server]\nmax_body_bytes = 1048576\n")
    big = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * (1024 * 1024 + 10)}]})
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url("/v1/chat/completions"), data=big, headers={"Content-Type": "application/json"}
        ) as resp:
            assert resp.status == 413
            error = (await resp.json())["error"]
    assert error["code"] == "request_too_large"
    assert "server.max_body_bytes" in error["message"]
    assert upstream.fake.chat_requests() == []


async def test_chunked_body_over_limit_is_413(make_proxy, upstream: Upstream) -> None:
    proxy = await make_proxy(proxy_toml="[server]\nmax_body_bytes = 1048576\n")

    async def chunks():
        yield b'{"model": "m", "messages": [{"role": "user", "content": "'
        for _ in range(20):
            yield b"y" * 65536
        yield b'"}]}'

    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url("/v1/chat/completions"), data=chunks(), headers={"Content-Type": "application/json"}
        ) as resp:
            assert resp.status == 413
    assert upstream.fake.chat_requests() == []


async def test_default_limit_accepts_a_5_mib_request(make_proxy, upstream: Upstream) -> None:
    # aiohttp's own default (1 MiB) would refuse a 200k-token conversation. A window it fits, so
    # the proxy forwards it as sent (a prompt over the window would be compacted first).
    proxy = await make_proxy({"default": 'default_context_window = 4000000\n[upstream]\nbase_url = "{upstream}"\n'})
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": "word " * 2200} for i in range(501)]
    raw = orjson.dumps({"model": "big-context-model", "messages": messages})
    assert len(raw) > 5 * 1024 * 1024
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url("/v1/chat/completions"), data=raw, headers={"Content-Type": "application/json"}
        ) as resp:
            assert resp.status == 200
    assert upstream.fake.chat_requests()[0].body == raw


async def test_unknown_path_and_method_are_openai_shaped(proxy: Proxy) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy.url("/nope")) as resp:
            assert resp.status == 404
            assert (await resp.json())["error"]["code"] == "not_found"
        async with http.post(proxy.url("/healthz")) as resp:
            assert resp.status == 405
            assert (await resp.json())["error"]["code"] == "method_not_allowed"


async def test_invalid_session_header(proxy: Proxy, upstream: Upstream) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url("/v1/chat/completions"),
            json={"model": "m", "messages": [USER]},
            headers={"X-Session-Id": "bad id with spaces"},
        ) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"]["param"] == "X-Session-Id"
    assert upstream.fake.chat_requests() == []

"""Bad input gets an OpenAI-shaped 400 / 413 that says what to fix, nothing forwarded — when no
upstream could use it (not a JSON object, no messages). A message ctxproxy cannot model is not
refused (never stricter than the upstream): it goes upstream as sent, the answer saying so."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from tests.conftest import Proxy, Upstream

USER = {"role": "user", "content": "hi"}

REFUSED = [
    # (raw body, status, param, words the message must contain)
    (b"{not json", 400, None, "not valid JSON"),
    (b"", 400, None, "empty"),
    (b"[1, 2]", 400, None, "must be a JSON object"),
    (b'"text"', 400, None, "must be a JSON object"),
    (orjson.dumps({"model": "m"}), 400, "messages", "`messages` is required"),
    (orjson.dumps({"model": "m", "messages": {"role": "user"}}), 400, "messages", "must be a list"),
    (orjson.dumps({"model": "m", "messages": []}), 400, "messages", "at least one"),
]

# (raw body, param): what ctxproxy cannot model, forwarded as sent.
AS_SENT = [
    (orjson.dumps({"model": "m", "messages": ["hi"]}), "messages[0]"),
    (orjson.dumps({"model": "m", "messages": [{"content": "x"}]}), "messages[0].role"),
    (orjson.dumps({"model": "m", "messages": [{"role": "robot", "content": "x"}]}), "messages[0].role"),
    (
        orjson.dumps({"model": "m", "messages": [USER, {"role": "user", "content": 5}]}),
        "messages[1].content",
    ),
    (orjson.dumps({"model": "m", "messages": [{"role": "user"}]}), "messages[0].content"),
    (
        orjson.dumps({"model": "m", "messages": [{"role": "user", "content": [{"text": "x"}]}]}),
        "messages[0].content[0]",
    ),
    (
        orjson.dumps({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}),
        "messages[0].content[0].text",
    ),
    (
        orjson.dumps(
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}
        ),
        "messages[0].content[0].image_url.url",
    ),
    (
        orjson.dumps(
            {
                "model": "m",
                "messages": [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
            }
        ),
        "messages[0].content[0]",
    ),
    (
        orjson.dumps({"model": "m", "messages": [{"role": "tool", "content": "r"}]}),
        "messages[0].tool_call_id",
    ),
    (
        orjson.dumps(
            {"model": "m", "messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}]}
        ),
        "messages[0].tool_calls[0]",
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
        "messages[0].tool_calls[0].function",
    ),
    (
        orjson.dumps({"model": "m", "messages": [{"role": "assistant", "content": None}]}),
        "messages[0].content",
    ),
    (
        orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x", "tool_calls": []}]}),
        "messages[0].tool_calls",
    ),
    (orjson.dumps({"model": 4, "messages": [USER]}), "model"),
    (orjson.dumps({"model": "m", "messages": [USER], "stream": "yes"}), "stream"),
    (orjson.dumps({"model": "m", "messages": [USER], "user": 7}), "user"),
]


@pytest.mark.parametrize(("raw", "status", "param", "words"), REFUSED)
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


@pytest.mark.parametrize(("raw", "param"), AS_SENT)
async def test_what_ctxproxy_cannot_model_is_forwarded_as_sent(
    proxy: Proxy, upstream: Upstream, raw: bytes, param: str
) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            proxy.url("/v1/chat/completions"), data=raw, headers={"Content-Type": "application/json"}
        ) as resp:
            assert resp.status < 500
            assert resp.headers["X-Ctx-Forwarded-As-Sent"] == param
            assert "X-Ctx-Tokens-After" not in resp.headers  # nothing was compacted or counted
    assert [r.body for r in upstream.fake.chat_requests()] == [raw]
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json={"model": "m", "messages": [USER]}) as resp:
            assert resp.status == 200
            assert "X-Ctx-Forwarded-As-Sent" not in resp.headers


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

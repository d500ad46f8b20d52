"""Chat completions request shapes from OpenAI's current reference and from OpenAI-compatible
servers: ctxproxy is never stricter than the upstream. A shape ctxproxy models is forwarded as
usual (the conversation as sent while it fits); one it does not — a custom tool's call, a role
of a newer API — goes upstream as sent, ``X-Ctx-Forwarded-As-Sent`` naming the place. Either way
the upstream answers, never ctxproxy with a 400."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest

from tests.conftest import Proxy, Upstream

USER = {"role": "user", "content": "hi"}
CUSTOM_CALL = {"id": "call_1", "type": "custom", "custom": {"name": "grammar", "input": "SELECT 1"}}

MODELLED: list[tuple[str, dict[str, Any]]] = [
    ("developer", {"messages": [{"role": "developer", "content": "Be terse."}, USER]}),
    ("file part", {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}]}),
    ("audio reply", {"messages": [USER, {"role": "assistant", "content": None, "audio": {"id": "audio_1"}}, USER]}),
    (
        "refusal part",
        {"messages": [USER, {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}, USER]},
    ),
    ("legacy function", {"messages": [USER, {"role": "function", "name": "f", "content": "{}"}, USER]}),
    (
        "new fields",
        {
            "messages": [USER],
            "reasoning_effort": "minimal",
            "verbosity": "low",
            "web_search_options": {"search_context_size": "low"},
            "prediction": {"type": "content", "content": "x"},
            "modalities": ["text"],
            "prompt_cache_key": "k1",
            "safety_identifier": "u-hash",
            "store": False,
            "metadata": {"a": "b"},
            "chat_template_kwargs": {"enable_thinking": False},  # vLLM
            "top_k": 20,  # llama.cpp, vLLM
        },
    ),
]
AS_SENT: list[tuple[str, dict[str, Any], str]] = [
    (
        "custom tool call",
        {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [CUSTOM_CALL]}, USER]},
        "messages[1].tool_calls[0]",
    ),
    ("a newer role", {"messages": [{"role": "critic", "content": "check it"}, USER]}, "messages[0].role"),
    ("lenient max_tokens", {"messages": [USER], "max_tokens": "128"}, "max_tokens"),
    (
        "image in a system message",
        {"messages": [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}, USER]},
        "messages[0].content[0]",
    ),
]


async def _post(proxy: Proxy, raw: bytes) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), data=raw) as resp:
            await resp.read()
            return resp


@pytest.mark.parametrize(("name", "fields"), MODELLED, ids=[name for name, _ in MODELLED])
async def test_modelled_shapes_are_forwarded_as_usual(
    proxy: Proxy, upstream: Upstream, name: str, fields: dict[str, Any]
) -> None:
    body = {"model": "gpt-4o-mini", **fields}
    resp = await _post(proxy, orjson.dumps(body))
    assert resp.status == 200
    assert "X-Ctx-Forwarded-As-Sent" not in resp.headers and "X-Ctx-Tokens-After" in resp.headers
    assert upstream.fake.chat_requests()[-1].json() == body


@pytest.mark.parametrize(("name", "fields", "param"), AS_SENT, ids=[name for name, _, _ in AS_SENT])
async def test_other_shapes_go_upstream_as_sent(
    proxy: Proxy, upstream: Upstream, name: str, fields: dict[str, Any], param: str
) -> None:
    raw = orjson.dumps({"model": "gpt-4o-mini", **fields})
    resp = await _post(proxy, raw)
    assert resp.status < 500
    assert resp.headers["X-Ctx-Forwarded-As-Sent"] == param
    assert upstream.fake.chat_requests()[-1].body == raw

"""Every body field ctxproxy reads has the JSON type the OpenAI API gives it, or ctxproxy does
not compact the request: it forwards it as sent (never stricter than the upstream, which may be
more lenient than OpenAI), ``X-Ctx-Forwarded-As-Sent`` naming the field. ``null`` means "not sent".

Types as in OpenAI's chat completions reference: ``tools`` a list of tool objects (a function
tool's ``function`` an object with a string ``name``; likewise a custom tool's ``custom``),
``tool_choice`` a string or an object, ``user`` a string, ``stream`` a boolean, ``max_tokens``,
``max_completion_tokens`` and ``n`` integers, ``stream_options`` an object whose
``include_usage`` is a boolean; the legacy ``functions`` a list of objects with a string ``name``.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest

from tests.conftest import Proxy, Upstream

USER = {"role": "user", "content": "hi"}


def _tool(name: Any = "lookup", kind: str = "function") -> dict[str, Any]:
    return {"type": kind, kind: {"name": name, "parameters": {"type": "object", "properties": {}}}}


BAD = [
    # (field, value, param)
    *[("tools", value, "tools") for value in (5, True, 1.5, "lookup", {"type": "function"})],
    ("tools", [5], "tools[0]"),
    ("tools", [_tool(), "lookup"], "tools[1]"),
    ("tools", [{"type": "function", "function": "lookup"}], "tools[0].function"),
    ("tools", [_tool(name=7)], "tools[0].function.name"),
    ("tools", [_tool(name=None)], "tools[0].function.name"),
    ("tools", [_tool(name=["a"], kind="custom")], "tools[0].custom.name"),
    *[("tool_choice", value, "tool_choice") for value in (5, True, 1.5, ["auto"])],
    *[("user", value, "user") for value in (5, True, ["u"], {"id": "u"})],
    *[("stream", value, "stream") for value in (1, "true", [], {})],
    *[("max_tokens", value, "max_tokens") for value in ("100", 1.5, True, [100])],
    *[("max_completion_tokens", value, "max_completion_tokens") for value in ("100", 2.5, False, {})],
    *[("n", value, "n") for value in ("2", 1.5, True, [1])],
    *[("stream_options", value, "stream_options") for value in (5, True, "include_usage", [True])],
    ("stream_options", {"include_usage": "yes"}, "stream_options.include_usage"),
    *[("functions", value, "functions") for value in (5, True, {"name": "f"})],
    ("functions", [5], "functions[0]"),
    ("functions", [{"name": 5}], "functions[0].name"),
]


async def _post(proxy: Proxy, body: dict[str, Any]) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), json=body) as resp:
            return resp.status, await resp.read()


@pytest.mark.parametrize(("field", "value", "param"), BAD, ids=[f"{param}-{type(v).__name__}" for _, v, param in BAD])
async def test_wrong_type_is_forwarded_as_sent_naming_the_field(
    proxy: Proxy, upstream: Upstream, field: str, value: Any, param: str
) -> None:
    raw = orjson.dumps({"model": "m", "messages": [USER], field: value})
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url("/v1/chat/completions"), data=raw) as resp:
            assert resp.status < 500
            assert resp.headers["X-Ctx-Forwarded-As-Sent"] == param
    assert [r.body for r in upstream.fake.chat_requests()] == [raw]


GOOD = [
    {"tools": None, "tool_choice": None, "user": None, "stream": None, "n": None, "stream_options": None},
    {"max_tokens": None, "max_completion_tokens": None, "functions": None},
    {"tools": [], "tool_choice": "auto", "n": 1, "max_tokens": 50, "max_completion_tokens": 60},
    {"tools": [_tool(), _tool("grep", kind="custom")], "tool_choice": {"type": "function", "function": {"name": "x"}}},
    {"tools": [{"type": "function", "function": None}], "tool_choice": "required", "n": 2},
    {"stream": True, "stream_options": {"include_usage": True}},
    {"stream": False, "stream_options": {}, "user": "u-1", "functions": [{"name": "f", "parameters": {}}]},
]


@pytest.mark.parametrize("fields", GOOD)
async def test_valid_types_forwarded(proxy: Proxy, upstream: Upstream, fields: dict[str, Any]) -> None:
    status, answer = await _post(proxy, {"model": "m", "messages": [USER], **fields})
    assert status == 200, answer
    assert len(upstream.fake.chat_requests()) == 1

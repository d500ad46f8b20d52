"""An upstream whose answer is not what HTTP allows gets the client a clear error in its own
protocol's shape (502, or 504 for a stall), never a 500, and the proxy goes on serving."""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import orjson
import pytest

from tests.conftest import MakeProxy, Proxy, Upstream
from tests.upstream.raw_upstream import raw_upstream

API_KEY = "sk-tenant-secret-0123456789"
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello there"}]}
GOOD = '[upstream]\nbase_url = "{upstream}"\n'

HOSTILE = {
    "garbage status line": (b"HTCPCP/9 I'm a teapot\r\n\r\n", "close"),
    "oversized header": (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 20000 + b"\r\nContent-Length: 2\r\n\r\n{}", "close"),
    "short body": (b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"id":', "close"),
    "reset mid-stream": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\ndata:\r\n",
        "reset",
    ),
    "bad chunk": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nnope\r\n", "keep"),
    "nothing at all": (b"", "close"),
}


def hostile_tenant(base_url: str, read_timeout: float = 1) -> str:
    return f'[upstream]\nbase_url = "{base_url}"\napi_key = "{API_KEY}"\nread_timeout = {read_timeout}\n'


async def post(proxy: Proxy, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as http:
        async with http.post(proxy.url(path), json=body, headers={"Authorization": "Bearer sk-client"}) as resp:
            return resp.status, await resp.read()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
async def test_a_hostile_answer_is_a_502_in_openai_shape(
    make_proxy: MakeProxy, upstream: Upstream, case: str, stream: bool
) -> None:
    answer, then = HOSTILE[case]
    async with raw_upstream(answer, then) as raw:
        proxy = await make_proxy({"default": GOOD, "bad": hostile_tenant(raw.base_url)})
        status, body = await post(proxy, "/t/bad/v1/chat/completions", {**CHAT, "stream": stream})
        assert raw.requests, "the request reached the hostile upstream"
    if status == 200:  # the stream had begun: it ends with the error event, never a clean end
        assert stream and b'"upstream_' in body and not body.endswith(b"data: [DONE]\n\n")
    else:
        assert status == 502, body
        error = orjson.loads(body)["error"]
        assert error["type"] == "upstream_error" and error["code"] == "upstream_connection_error"
        assert "127.0.0.1" not in error["message"] and API_KEY not in body.decode()
    status, body = await post(proxy, "/v1/chat/completions", CHAT)
    assert status == 200 and orjson.loads(body)["choices"][0]["message"]["content"] == "echo: hello there"


async def test_a_stalled_head_is_a_504_in_anthropic_shape(make_proxy: MakeProxy, upstream: Upstream) -> None:
    async with raw_upstream(b"HTTP/1.1 200 OK\r\n", "keep") as raw:  # the head never ends
        proxy = await make_proxy({"default": GOOD, "bad": hostile_tenant(raw.base_url, read_timeout=0.3)})
        client = anthropic.AsyncAnthropic(base_url=proxy.url("/t/bad"), api_key="sk-client", max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as caught:
            await client.messages.create(
                model="claude-sonnet-4-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
        await client.close()
    assert caught.value.status_code == 504
    assert caught.value.body["type"] == "error"  # type: ignore[index]
    status, _ = await post(proxy, "/v1/chat/completions", CHAT)
    assert status == 200

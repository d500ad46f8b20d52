"""The fake upstream must be faithful: the real ``openai`` SDK has to parse everything it
sends, and failure modes must look like real network failures."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp.test_utils import TestServer

from tests.fakes.upstream import FakeUpstream, openai_error, start_fake_upstream

USER: list[Any] = [{"role": "user", "content": "hello there world"}]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look something up",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


@pytest.fixture
async def upstream(aiohttp_server: Any) -> tuple[FakeUpstream, TestServer]:
    return await start_fake_upstream(aiohttp_server)


@pytest.fixture
def fake(upstream: tuple[FakeUpstream, TestServer]) -> FakeUpstream:
    return upstream[0]


@pytest.fixture
def server(upstream: tuple[FakeUpstream, TestServer]) -> TestServer:
    return upstream[1]


@pytest.fixture
async def client(server: TestServer) -> AsyncIterator[openai.AsyncOpenAI]:
    sdk = openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key="sk-test", max_retries=0)
    async with sdk:
        yield sdk


async def test_json_echo_parses_with_sdk(client: openai.AsyncOpenAI, fake: FakeUpstream) -> None:
    raw = await client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=USER)
    completion = raw.parse()

    assert completion.object == "chat.completion"
    assert completion.model == "gpt-4o-mini"
    choice = completion.choices[0]
    assert choice.message.content == "echo: hello there world"
    assert choice.message.role == "assistant"
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    # ctxproxy's own count of the prompt: 3 per message, the role, the text, 3 to prime the reply.
    assert completion.usage.prompt_tokens == 3 + 1 + 3 + 3
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    assert raw.headers["x-request-id"] == "req_1"
    assert "openai-processing-ms" in raw.headers
    assert raw.headers["content-type"] == "application/json"
    assert len(fake.chat_requests()) == 1


async def test_text_parts_and_last_user_message(client: openai.AsyncOpenAI, fake: FakeUpstream) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "part one, "}, {"type": "text", "text": "part two"}]},
        {"role": "assistant", "content": "ok"},
    ]
    completion = await client.chat.completions.create(model="gpt-4o", messages=messages)
    assert completion.choices[0].message.content == "echo: part one, part two"
    assert completion.model == "gpt-4o"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == fake.prompt_tokens({"messages": messages}) > 3 * 3


async def test_stream_echo_reassembles_to_json_content(client: openai.AsyncOpenAI) -> None:
    completion = await client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    stream = await client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
    chunks = [chunk async for chunk in stream]

    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    content_deltas = [c.choices[0].delta.content for c in chunks[1:-1]]
    assert content_deltas == ["echo: ", "hello ", "there ", "world"]  # one per word
    assert "".join(content_deltas) == completion.choices[0].message.content  # type: ignore[arg-type]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in chunks)


async def test_include_usage_chunk_only_when_asked(client: openai.AsyncOpenAI, fake: FakeUpstream) -> None:
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=USER, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None and last.usage.prompt_tokens == fake.prompt_tokens({"messages": USER})
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-2].choices[0].finish_reason == "stop"

    stream = await client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
    assert all(c.choices and c.usage is None for c in [chunk async for chunk in stream])


async def test_sse_wire_format(server: TestServer, http: aiohttp.ClientSession) -> None:
    body = {"model": "gpt-4o-mini", "messages": USER, "stream": True}
    async with http.post(server.make_url("/v1/chat/completions"), json=body) as resp:
        assert resp.status == 200
        assert resp.content_type == "text/event-stream"
        assert resp.headers["x-request-id"] == "req_1"
        raw = (await resp.read()).decode()
    events = raw.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    first = json.loads(events[0].removeprefix("data: "))
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    final = json.loads(events[-3].removeprefix("data: "))
    assert final["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}


async def test_echo_tool_call_json_and_stream(client: openai.AsyncOpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "please CALL_TOOL:lookup"}]
    completion = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert call.type == "function"
    assert (call.function.name, call.function.arguments) == ("lookup", '{"q": "x"}')

    async with client.chat.completions.stream(model="gpt-4o-mini", messages=messages, tools=TOOLS) as stream:
        final = await stream.get_final_completion()
    streamed = final.choices[0]
    assert streamed.finish_reason == "tool_calls"
    assert streamed.message.tool_calls is not None
    assert streamed.message.tool_calls[0].function.name == "lookup"
    assert streamed.message.tool_calls[0].function.arguments == '{"q": "x"}'


async def test_scripted_tool_calls_stream_incrementally(
    client: openai.AsyncOpenAI, server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream
) -> None:
    calls = [
        {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "cats"}'}},
        {"id": "call_b", "type": "function", "function": {"name": "fetch", "arguments": '{"url": "http://x"}'}},
    ]
    fake.reply_stream(tool_calls=calls)
    async with client.chat.completions.stream(model="gpt-4o-mini", messages=USER, tools=TOOLS) as stream:
        final = await stream.get_final_completion()
    got = final.choices[0].message.tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in got] == [
        ("call_a", "lookup", '{"q": "cats"}'),
        ("call_b", "fetch", '{"url": "http://x"}'),
    ]

    # Raw deltas: the first delta of a call names it, later ones only carry argument pieces.
    fake.reply_stream(tool_calls=calls[:1])
    async with http.post(server.make_url("/v1/chat/completions"), json={"model": "m", "messages": USER}) as resp:
        lines = [line for line in (await resp.text()).split("\n\n") if line.startswith("data: {")]
    deltas = [json.loads(line[6:])["choices"][0]["delta"].get("tool_calls") for line in lines]
    deltas = [d[0] for d in deltas if d]
    assert deltas[0] == {
        "index": 0,
        "id": "call_a",
        "type": "function",
        "function": {"name": "lookup", "arguments": ""},
    }
    assert len(deltas) >= 3
    assert all(set(d) == {"index", "function"} and set(d["function"]) == {"arguments"} for d in deltas[1:])
    assert "".join(d["function"]["arguments"] for d in deltas[1:]) == '{"q": "cats"}'


async def test_reply_json_scripted(client: openai.AsyncOpenAI, fake: FakeUpstream) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102}
    fake.reply_json("scripted!", usage=usage, model="gpt-4o-2024-08-06", headers={"x-extra": "1"})
    raw = await client.chat.completions.with_raw_response.create(model="gpt-4o", messages=USER)
    completion = raw.parse()
    assert completion.choices[0].message.content == "scripted!"
    assert completion.model == "gpt-4o-2024-08-06"
    assert completion.usage is not None and completion.usage.prompt_tokens == 100
    assert raw.headers["x-extra"] == "1"
    assert fake.pending == 0
    # queue empty again: back to echo
    again = await client.chat.completions.create(model="gpt-4o", messages=USER)
    assert again.choices[0].message.content == "echo: hello there world"


async def test_reply_error_429_is_rate_limit_error(client: openai.AsyncOpenAI, fake: FakeUpstream) -> None:
    body = openai_error("Rate limit reached", type="requests", code="rate_limit_exceeded")
    fake.reply_error(429, body, headers={"Retry-After": "7"})
    with pytest.raises(openai.RateLimitError) as info:
        await client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert info.value.response.headers["retry-after"] == "7"
    assert info.value.code == "rate_limit_exceeded"
    assert info.value.body == body["error"]


async def test_reply_error_plain_text(server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream) -> None:
    fake.reply_error(502, "<html>Bad Gateway</html>")
    async with http.post(server.make_url("/v1/chat/completions"), json={}) as resp:
        assert resp.status == 502
        assert resp.content_type == "text/plain"
        assert await resp.text() == "<html>Bad Gateway</html>"


async def test_cut_after_fails_the_reader(server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream) -> None:
    fake.reply_stream(["a", "b", "c", "d"], cut_after=2)
    body = {"model": "gpt-4o-mini", "messages": USER, "stream": True}
    received = b""
    with pytest.raises(aiohttp.ClientPayloadError):
        async with http.post(server.make_url("/v1/chat/completions"), json=body) as resp:
            assert resp.status == 200
            async for chunk in resp.content.iter_any():
                received += chunk
    assert received.count(b"data: ") == 2
    assert b"[DONE]" not in received
    assert fake.cancellations == 0  # our own cut is not a client disconnect


async def test_cut_after_surfaces_in_sdk(client: openai.AsyncOpenAI, fake: FakeUpstream) -> None:
    fake.reply_stream(["a", "b", "c"], cut_after=3)
    stream = await client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
    got: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        async for chunk in stream:
            got.append(chunk.choices[0].delta.content or "")
    assert got == ["", "a", "b"]


async def test_end_after_ends_cleanly_without_done(
    server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream
) -> None:
    fake.reply_stream(["a", "b", "c", "d"], end_after=2)
    body = {"model": "gpt-4o-mini", "messages": USER, "stream": True}
    async with http.post(server.make_url("/v1/chat/completions"), json=body) as resp:
        received = await resp.read()  # a clean end: no ClientPayloadError
    assert received.count(b"data: ") == 2 and received.endswith(b"\n\n")
    assert b"[DONE]" not in received


@pytest.mark.parametrize("ending", ["cut_after", "end_after"])
async def test_half_event_stops_mid_event(
    server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream, ending: str
) -> None:
    fake.reply_stream(["a", "b", "c", "d"], half_event=True, **{ending: 2})
    body = {"model": "gpt-4o-mini", "messages": USER, "stream": True}
    received = b""
    async with http.post(server.make_url("/v1/chat/completions"), json=body) as resp:
        try:
            async for chunk in resp.content.iter_any():
                received += chunk
        except aiohttp.ClientPayloadError:
            assert ending == "cut_after"
    whole, half = received.rsplit(b"\n\n", 1)
    assert whole.count(b"data: ") == 2
    assert half.startswith(b"data: {") and not half.endswith(b"}")


async def test_reasoning_and_id_less_calls(server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream) -> None:
    lookup = {"function": {"name": "lookup", "arguments": "{}"}}
    fake.reply_json(tool_calls=[lookup], reasoning="think", ids=False)
    fake.reply_stream(["a"], tool_calls=[lookup], reasoning=["th", "ink"], ids=False)
    url = server.make_url("/v1/chat/completions")
    async with http.post(url, json={"model": "m", "messages": USER}) as resp:
        message = (await resp.json())["choices"][0]["message"]
    assert message["reasoning_content"] == "think" and "id" not in message["tool_calls"][0]
    async with http.post(url, json={"model": "m", "messages": USER, "stream": True}) as resp:
        raw = await resp.read()
    chunks = [json.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "think"
    starts = [
        call for d in deltas for call in d.get("tool_calls", []) if "function" in call and "name" in call["function"]
    ]
    assert len(starts) == 1 and "id" not in starts[0]


async def test_reply_reset(server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream) -> None:
    fake.reply_reset()
    with pytest.raises(aiohttp.ServerDisconnectedError):
        async with http.post(server.make_url("/v1/chat/completions"), json={"model": "m", "messages": USER}):
            pass
    assert len(fake.requests) == 1  # recorded even though never answered
    # the server keeps working
    async with http.post(server.make_url("/v1/chat/completions"), json={"model": "m", "messages": USER}) as resp:
        assert resp.status == 200


async def test_reply_sse_error(server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream) -> None:
    err = {"message": "overloaded", "type": "server_error", "param": None, "code": None}
    fake.reply_sse_error(err, after_pieces=["par", "tial"])
    async with http.post(server.make_url("/v1/chat/completions"), json={"model": "m", "messages": USER}) as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        events = [e for e in (await resp.text()).split("\n\n") if e]
    assert len(events) == 4  # role, "par", "tial", error
    assert json.loads(events[-1].removeprefix("data: ")) == {"error": err}
    assert "[DONE]" not in events


async def test_reply_sse_error_gate_holds_the_error_event(
    server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream
) -> None:
    err = {"message": "too long", "type": "invalid_request_error", "param": None, "code": "context_length_exceeded"}
    gate = asyncio.Event()
    fake.reply_sse_error(err, after_pieces=["par", "tial"], gate=gate)
    async with http.post(server.make_url("/v1/chat/completions"), json={"model": "m", "messages": USER}) as resp:
        before = [await resp.content.readuntil(b"\n\n") for _ in range(3)]  # role, "par", "tial"
        assert not gate.is_set() and all(b'"error"' not in e for e in before)
        gate.set()
        rest = [e for e in (await resp.text()).split("\n\n") if e]
    assert [json.loads(e.removeprefix("data: ")) for e in rest] == [{"error": err}]


async def test_delay_then_client_cancel_sets_cancelled(
    server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream
) -> None:
    fake.reply_delay(30)
    with pytest.raises(asyncio.TimeoutError):
        await http.post(
            server.make_url("/v1/chat/completions"),
            json={"model": "m", "messages": USER},
            timeout=aiohttp.ClientTimeout(total=0.2),
        )
    await asyncio.wait_for(fake.cancelled.wait(), 5)
    assert fake.cancellations == 1


async def test_delay_then_answers(client: openai.AsyncOpenAI, fake: FakeUpstream) -> None:
    fake.reply_delay(0.05, then="auto")
    stream = await client.chat.completions.create(model="gpt-4o-mini", messages=USER, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream])
    assert text == "echo: hello there world"
    assert not fake.cancelled.is_set()


async def test_stream_delay_relays_each_event_as_sent(
    server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream
) -> None:
    fake.reply_stream(["x", "y"], delay=0.1)
    loop = asyncio.get_running_loop()
    async with http.post(server.make_url("/v1/chat/completions"), json={"model": "m", "messages": USER}) as resp:
        start = loop.time()
        first = await resp.content.readuntil(b"\n\n")
        assert loop.time() - start < 0.09
        assert b'"role":"assistant"' in first
        await resp.read()
        assert loop.time() - start >= 0.4  # 5 events after the first, 0.1 s apart


async def test_recorded_request_holds_exact_bytes(
    server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream
) -> None:
    payload = b'{"model":"gpt-4o-mini",  "messages":[{"role":"user","content":"h\\u00e9"}]}'
    async with http.post(
        server.make_url("/v1/chat/completions?x=1"),
        data=payload,
        headers={"Content-Type": "application/json", "Authorization": "Bearer sk-abc"},
    ) as resp:
        assert (await resp.json())["choices"][0]["message"]["content"] == "echo: hé"
    (rec,) = fake.requests
    assert rec.body == payload
    assert rec.method == "POST" and rec.path == "/v1/chat/completions" and rec.query_string == "x=1"
    assert rec.headers["authorization"] == "Bearer sk-abc"
    assert rec.json()["messages"][0]["content"] == "hé"


async def test_passthrough_echo_large_put(server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream) -> None:
    data = os.urandom(5 * 1024 * 1024)
    async with http.put(
        server.make_url("/v1/files/abc?purpose=x"), data=io.BytesIO(data), headers={"X-Custom": "v"}
    ) as resp:
        assert resp.status == 200
        echoed = await resp.json()
    assert echoed["method"] == "PUT"
    assert echoed["path"] == "/v1/files/abc"
    assert echoed["query"] == "purpose=x"
    assert echoed["headers"]["x-custom"] == "v"
    assert echoed["body_len"] == len(data)
    assert echoed["body_sha256"] == hashlib.sha256(data).hexdigest()
    assert fake.requests[0].body == data
    assert fake.chat_requests() == []


async def test_for_path_scopes_behaviour(client: openai.AsyncOpenAI, fake: FakeUpstream) -> None:
    fake.for_path("/v1/embeddings").reply_error(500, openai_error("boom", type="server_error"))
    # chat requests do not consume it
    assert (await client.chat.completions.create(model="m", messages=USER)).choices[0].message.content
    with pytest.raises(openai.InternalServerError):
        await client.embeddings.create(model="text-embedding-3-small", input="hi")
    assert fake.pending == 0


async def test_models_list(client: openai.AsyncOpenAI) -> None:
    models = [m async for m in client.models.list()]
    assert "gpt-4o-mini" in [m.id for m in models]
    assert all(m.owned_by == "openai" and m.object == "model" for m in models)


async def test_reply_raw_gzip(server: TestServer, http: aiohttp.ClientSession, fake: FakeUpstream) -> None:
    fake.reply_raw(
        200,
        gzip.compress(b'{"ok": true}'),
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    async with http.post(server.make_url("/v1/chat/completions"), json={}) as resp:
        assert resp.headers["Content-Encoding"] == "gzip"
        assert await resp.json() == {"ok": True}


async def test_invalid_json_is_openai_400(
    client: openai.AsyncOpenAI, server: TestServer, http: aiohttp.ClientSession
) -> None:
    async with http.post(server.make_url("/v1/chat/completions"), data=b"{nope") as resp:
        assert resp.status == 400
        error = (await resp.json())["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"

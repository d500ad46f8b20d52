"""``forward_messages`` against the fake Anthropic upstream on loopback, driven over HTTP.

A minimal aiohttp app in front of it routes ``POST /v1/messages`` to ``forward_messages`` with a
tenant pointing at the fake, and keeps what each call returned; clients (aiohttp, the real
``anthropic`` SDK) talk to that app as they would to ctxproxy.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import anthropic
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from structlog.testing import capture_logs

from ctxproxy.config.models import TenantConfig, UpstreamConfig
from ctxproxy.pipeline.wire import Relayed
from ctxproxy.services import LOG_FIELDS
from ctxproxy.upstream.client import open_session
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.upstream.overflow_numbers import OverflowNumbers
from ctxproxy.wire.anthropic.forward import forward_messages
from ctxproxy.wire.anthropic.relay import TRUNCATED, MessagesFramer
from ctxproxy.wire.anthropic.sse import parse_events
from tests.fakes.anthropic_upstream import AnthropicWindow, FakeAnthropic, anthropic_error, start_fake_anthropic
from tests.fakes.anthropic_wire import reported

MODEL = "claude-sonnet-4-6"
VERSION = {"anthropic-version": "2023-06-01"}
MARK = {"X-Ctx-Tokens-After": "7"}  # what the pipeline adds to the answer
CACHE_USAGE = {"input_tokens": 11, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000}


def request_body(text: str = "hello there world", *, stream: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": text}]}
    return {**body, "stream": True} if stream else body


@dataclass
class Front:
    """The app in front of the fake, and what ``forward_messages`` returned to it."""

    fake: FakeAnthropic
    server: TestServer
    results: list[Relayed | Overflow] = field(default_factory=list)

    def url(self, path: str = "/v1/messages") -> str:
        return str(self.server.make_url(path))

    def sdk(self, api_key: str = "sk-ant-client") -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(base_url=self.url(""), api_key=api_key, max_retries=0)

    async def post(
        self, body: dict[str, Any], headers: dict[str, str] | None = None, query: str = ""
    ) -> tuple[int, Any, bytes]:
        async with aiohttp.ClientSession() as client:
            url = self.url() + query
            async with client.post(url, data=orjson.dumps(body), headers={**VERSION, **(headers or {})}) as answer:
                return answer.status, answer.headers, await answer.read()


MakeFront = Callable[..., Awaitable[Front]]


class UncancelledServer(TestServer):
    """A test server whose handlers go on when their client goes away."""

    async def _make_runner(self, **kwargs: Any) -> web.AppRunner:
        return web.AppRunner(self.app, **{**kwargs, "handler_cancellation": False})


@pytest.fixture
async def make_front(aiohttp_server: Any) -> AsyncIterator[MakeFront]:
    http = await open_session()
    uncancelled: list[TestServer] = []

    async def factory(api_key: str | None = None, *, handler_cancellation: bool = True) -> Front:
        fake, upstream = await start_fake_anthropic(aiohttp_server)
        tenant = TenantConfig(
            name="t", upstream=UpstreamConfig(base_url=str(upstream.make_url("/v1")), api_key=api_key)
        )
        results: list[Relayed | Overflow] = []

        async def handle(request: web.Request) -> web.StreamResponse:
            request[LOG_FIELDS] = {}
            body = await request.read()
            stream = orjson.loads(body).get("stream") is True
            answer = await forward_messages(request, http, tenant, body, stream, MARK)
            results.append(answer)
            if isinstance(answer, Overflow):
                return web.json_response({"overflow": True})
            return answer.response

        app = web.Application()
        app.router.add_post("/v1/messages", handle)
        if handler_cancellation:  # as ctxproxy serves
            return Front(fake, await aiohttp_server(app), results)
        server = UncancelledServer(app)
        uncancelled.append(server)
        await server.start_server()
        return Front(fake, server, results)

    yield factory
    for server in uncancelled:
        await server.close()
    await http.close()


@pytest.fixture
async def front(make_front: MakeFront) -> Front:
    return await make_front()


def events_of(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    return [(event.name, orjson.loads(event.data)) for event in parse_events(body)]


def sse(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def relayed(front: Front) -> Relayed:
    [answer] = front.results
    assert isinstance(answer, Relayed)
    return answer


# --- JSON answers -----------------------------------------------------------------------------


async def test_json_answer_is_relayed_byte_exact_with_its_whole_prompt_count(front: Front) -> None:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    sent = orjson.dumps({**message, "usage": {**CACHE_USAGE, "output_tokens": 2}}, option=orjson.OPT_INDENT_2)
    front.fake.reply_raw(200, sent, headers={"Content-Type": "application/json", "request-id": "req_raw"})
    status, headers, body = await front.post(request_body(), query="?beta=true")
    assert (status, body) == (200, sent)
    assert headers["request-id"] == "req_raw" and headers["X-Ctx-Tokens-After"] == "7"
    assert front.fake.message_requests()[0].query_string == "beta=true"
    answer = relayed(front)
    assert (
        answer.prompt_tokens == sum(CACHE_USAGE.values()) and not answer.prompt_tokens_partial
    )  # the sum is the whole prompt


async def test_json_answer_through_the_sdk_reports_the_upstreams_count(front: Front) -> None:
    async with front.sdk() as sdk:
        message = await sdk.messages.create(**request_body())
    assert [block.text for block in message.content if block.type == "text"] == ["echo: hello there world"]
    answer = relayed(front)
    assert answer.prompt_tokens == front.fake.prompt_tokens(request_body()) == message.usage.input_tokens
    assert not answer.prompt_tokens_partial


@pytest.mark.parametrize("stream", [False, True])
async def test_an_error_that_is_no_overflow_is_relayed_as_it_came(front: Front, stream: bool) -> None:
    error = anthropic_error("Overloaded", "overloaded_error")
    front.fake.reply_error(529, error)
    status, headers, body = await front.post(request_body(stream=stream))
    assert (status, orjson.loads(body)) == (529, error) and headers["X-Ctx-Tokens-After"] == "7"
    assert relayed(front).prompt_tokens is None


# --- overflow ---------------------------------------------------------------------------------


@pytest.mark.parametrize("in_stream", [False, True])
async def test_a_refusal_as_too_long_is_an_overflow_with_its_numbers(front: Front, in_stream: bool) -> None:
    front.fake.window = AnthropicWindow(limit=5, in_stream=in_stream)
    body = request_body("a prompt far longer than five tokens", stream=in_stream)
    status, _, answer = await front.post(body)
    assert (status, orjson.loads(answer)) == (200, {"overflow": True})  # nothing of the upstream's was sent
    assert front.results == [Overflow(OverflowNumbers(limit=5, prompt=front.fake.prompt_tokens(body)))]


async def test_an_overflow_event_after_content_is_relayed_not_retried(front: Front) -> None:
    gate = asyncio.Event()
    refusal = "prompt is too long: 900 tokens > 5 maximum"
    front.fake.reply_sse_error("invalid_request_error", refusal, after_pieces=["Hel", "lo"], gate=gate)
    async with aiohttp.ClientSession() as client:
        async with client.post(front.url(), data=orjson.dumps(request_body(stream=True)), headers=VERSION) as up:
            seen = b""
            while b"text_delta" not in seen:  # the content arrives before the upstream sends its error
                seen += await up.content.readany()
            gate.set()
            seen += await up.content.read()
    events = events_of(seen)
    assert [name for name, _ in events][-1] == "error" and [name for name, _ in events].count("error") == 1
    assert events[-1][1] == anthropic_error(refusal, "invalid_request_error")
    assert isinstance(relayed(front), Relayed)


# --- streams ----------------------------------------------------------------------------------


async def test_stream_is_relayed_event_exact_with_its_latest_usage(front: Front) -> None:
    start_usage = {**CACHE_USAGE, "output_tokens": 1}
    delta_usage = {"input_tokens": 12, "cache_read_input_tokens": 3100, "output_tokens": 9}  # cumulative
    sent = b"".join(
        [
            sse("message_start", {"type": "message_start", "message": {"id": "m", "usage": start_usage}}),
            b": a comment\r\n\r\n",
            sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
            sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"text": "hi"}}),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": delta_usage}),
            sse("message_stop", {"type": "message_stop"}),
        ]
    )
    front.fake.reply_raw(200, sent, headers={"Content-Type": "text/event-stream", "request-id": "req_s"})
    status, headers, body = await front.post(request_body(stream=True))
    assert (status, body) == (200, sent)
    assert headers["request-id"] == "req_s" and headers["X-Ctx-Tokens-After"] == "7"
    answer = relayed(front)
    assert answer.prompt_tokens == 12 + 200 + 3100 and not answer.prompt_tokens_partial  # the sum is the whole prompt


async def test_stream_through_the_sdk_arrives_whole(front: Front) -> None:
    front.fake.reply_stream(["Hel", "lo", " you"], usage={**CACHE_USAGE, "output_tokens": 4}, delay=0.01)
    async with front.sdk() as sdk, sdk.messages.stream(**request_body()) as stream:
        pieces = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert pieces == ["Hel", "lo", " you"] and final.stop_reason == "end_turn"
    assert final.usage.cache_read_input_tokens == 3000 and final.usage.output_tokens == 4
    answer = relayed(front)
    assert (
        answer.prompt_tokens == sum(CACHE_USAGE.values()) and not answer.prompt_tokens_partial
    )  # the sum is the whole prompt


async def test_a_last_event_without_its_blank_line_keeps_its_name(front: Front) -> None:
    events = [sse("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 5}}})]
    tail = b'event: message_stop\ndata: {"type":"message_stop"}'
    front.fake.reply_raw(200, events[0] + tail, headers={"Content-Type": "text/event-stream"})
    _, _, body = await front.post(request_body(stream=True))
    assert body == events[0] + tail + b"\n\n"  # complete: no error follows
    assert relayed(front).prompt_tokens == 5


@pytest.mark.parametrize("half_event", [False, True])
async def test_a_cut_stream_ends_with_an_error_event_and_the_sdk_raises(front: Front, half_event: bool) -> None:
    front.fake.reply_stream(["Hel", "lo"], cut_after=4, half_event=half_event)
    async with front.sdk() as sdk:
        stream = await sdk.messages.create(**request_body(stream=True))
        kinds = []
        with pytest.raises(anthropic.APIStatusError) as raised:
            async for event in stream:
                kinds.append(event.type)
    assert kinds == ["message_start", "content_block_start", "content_block_delta"]  # the SDK skips ping
    kind, message = reported(raised.value)
    assert kind == "api_error" and "closed the connection" in message


@pytest.mark.parametrize("half_event", [False, True])
async def test_a_stream_that_stops_before_message_stop_says_it_was_cut_short(front: Front, half_event: bool) -> None:
    front.fake.reply_stream(["Hel", "lo"], end_after=5, half_event=half_event)
    _, _, body = await front.post(request_body(stream=True))
    assert body.endswith(b"\n\n") and b"\n\n\n" not in body  # no half event in it
    events = events_of(body)
    names = [name for name, _ in events]
    assert names == ["message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta"] + [
        "error"
    ]
    assert events[-1][1]["error"] == {"type": "api_error", "message": TRUNCATED}
    assert relayed(front).prompt_tokens == front.fake.prompt_tokens(request_body())


async def test_an_error_event_of_the_upstream_ends_the_stream_as_it_came(front: Front) -> None:
    front.fake.reply_sse_error("overloaded_error", "Overloaded", after_pieces=["Hel"])
    async with front.sdk() as sdk:
        with pytest.raises(anthropic.APIStatusError) as raised:
            async with sdk.messages.stream(**request_body()) as stream:
                await stream.until_done()
    assert reported(raised.value) == ("overloaded_error", "Overloaded")


async def disconnect_mid_stream(front: Front) -> None:
    front.fake.reply_stream([f"w{i} " for i in range(200)], delay=0.01)
    async with aiohttp.ClientSession() as client:
        up = await client.post(front.url(), data=orjson.dumps(request_body(stream=True)), headers=VERSION)
        await up.content.readuntil(b"\n\n")
        up.close()
    await asyncio.wait_for(front.fake.cancelled.wait(), 5)  # the upstream's answer was closed


async def test_a_client_that_goes_away_stops_the_relay(front: Front) -> None:
    await disconnect_mid_stream(front)  # served as ctxproxy serves: the handler is cancelled
    assert front.fake.cancellations == 1 and front.results == []


async def test_a_failed_write_to_the_client_stops_the_relay(make_front: MakeFront) -> None:
    front = await make_front(handler_cancellation=False)  # the write notices first
    with capture_logs() as logs:
        await disconnect_mid_stream(front)
    assert isinstance(relayed(front), Relayed)
    assert [log["event"] for log in logs if log["log_level"] == "info"] == ["client.disconnected_mid_stream"]


# --- keys -------------------------------------------------------------------------------------


async def test_the_tenants_key_replaces_every_client_credential(make_front: MakeFront) -> None:
    front = await make_front(api_key="sk-ant-tenant")
    front.fake.api_key = "sk-ant-tenant"
    client = {"x-api-key": "sk-client", "Authorization": "Bearer sk-client", "anthropic-beta": "b1", "X-Ctx-User": "u"}
    status, _, _ = await front.post(request_body(), headers=client)
    async with front.sdk() as sdk:  # SDK 2.x sends its key as a bearer token
        await sdk.messages.create(**request_body())
    assert status == 200 and len(front.results) == 2
    for seen in front.fake.message_requests():
        assert seen.headers.getall("x-api-key") == ["sk-ant-tenant"] and "Authorization" not in seen.headers
        assert seen.headers["anthropic-version"]
    first = front.fake.message_requests()[0].headers
    assert first["anthropic-beta"] == "b1" and "X-Ctx-User" not in first


async def test_without_a_tenant_key_the_clients_credentials_pass(front: Front) -> None:
    client = {"x-api-key": "sk-client", "Authorization": "Bearer sk-other", "anthropic-beta": "b1,b2"}
    await front.post(request_body(), headers=client)
    seen = front.fake.message_requests()[0].headers
    assert (seen["x-api-key"], seen["Authorization"], seen["anthropic-beta"]) == (
        "sk-client",
        "Bearer sk-other",
        "b1,b2",
    )
    assert seen["anthropic-version"] == VERSION["anthropic-version"]


# --- the framer's last event ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tail", "kept"),
    [
        (
            b'event: message_stop\ndata: {"type":"message_stop"}',
            b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
        ),
        (
            b'event: message_stop\r\ndata: {"type":"message_stop"}\r\n',
            b'event: message_stop\r\ndata: {"type":"message_stop"}\n\n',
        ),
        (b'event: message_stop\ndata: {"type":"mess', b""),  # cut in its data
        (b"event: message_stop\n", b""),  # cut before its data
        (b'event: ping\ndata: {"type":"ping"}\nevent: message_st', b""),  # the next event had begun
        (b"", b""),
    ],
)
def test_the_framer_keeps_only_a_whole_last_event(tail: bytes, kept: bytes) -> None:
    framer = MessagesFramer()
    first = sse("ping", {"type": "ping"})
    assert framer.feed(first + tail) == first
    assert framer.end() == kept
    assert framer.end() == b""

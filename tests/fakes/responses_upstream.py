"""A fake Responses upstream: a real aiohttp application speaking OpenAI's Responses API on loopback.

It answers as api.openai.com does and records every request, so tests can point ctxproxy (or the
``openai`` SDK, ``base_url=str(server.make_url("/v1"))``) at it and assert on the wire::

    fake, server = await start_fake_responses(aiohttp_server)
    fake.reply(text="Hello", pieces=["Hel", "lo"])     # script the next /v1/responses request
    ...
    assert fake.response_requests()[0].json()["store"] is False

Routes: ``POST /v1/responses`` runs the next scripted behaviour, else validates the request like
the real API (``responses_checks``; 400 ``invalid_request_error``), refuses a prompt over
:attr:`FakeResponses.window` tokens (``context_length_exceeded``: a JSON 400, or in a stream as
:attr:`FakeResponses.refuse_in_stream` says, an ``error`` or a ``response.failed`` event after
``response.created`` and ``response.in_progress``), and answers as the echo model: ``"echo: " + the
last user message's text``, or, with tools and ``CALL_TOOL:<name>`` in that text, a call of
``<name>``. It answers JSON, or events for ``"stream": true``. A ``compaction_trigger`` item is
refused (a provider without server-side compaction) unless :attr:`FakeResponses.serves_compaction`;
then its answer is one ``compaction`` item, and so is ``POST /v1/responses/compact``'s (404
otherwise). ``GET /v1/responses`` upgrades to the WebSocket transport when
:attr:`FakeResponses.websocket` (each ``response.create`` message answered with the events of a
response, one message each), else is a 404. Any other path: 404.

Prompt size: the fake's own count, the cl100k tokens of the strings in ``instructions`` and
``input`` (:meth:`FakeResponses.prompt_tokens`: about what OpenAI counts, independent of how
ctxproxy reads the items), reported as ``usage.input_tokens``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer

from ctxproxy.tokens import TokenCounter
from tests.fakes.responses_checks import check_request
from tests.fakes.responses_wire import Answer, numbered, openai_error, response_events, response_object, sse_bytes
from tests.fakes.serving import Ending, Recorded, ScriptedFake

__all__ = ["COMPACT_PATH", "RESPONSES_PATH", "FakeResponses", "openai_error", "start_fake_responses"]

RESPONSES_PATH = "/v1/responses"
COMPACT_PATH = "/v1/responses/compact"
TOO_LONG = "Your input exceeds the context window of this model. Please adjust your input and try again."
_CALL_TOOL = re.compile(r"CALL_TOOL:([A-Za-z0-9_.-]+)")


@dataclass
class _Ctx:
    request: web.Request
    recorded: Recorded
    number: int
    default: Callable[[_Ctx], Awaitable[web.StreamResponse]]

    def payload(self) -> dict[str, Any]:
        return self.recorded.payload()


@dataclass(frozen=True)
class Script:
    """What the model says: ``text`` (None: the echo), ``calls`` (``{"name", "arguments"?,
    "call_id"?}``), a ``reasoning`` item first, ``compaction`` (one compaction item)."""

    text: str | None = None
    calls: list[dict[str, Any]] | None = None
    reasoning: str | None = None
    compaction: bool = False
    pieces: list[str] | None = None
    usage: dict[str, Any] | None = None


class FakeResponses(ScriptedFake):
    default_path = RESPONSES_PATH

    def __init__(self) -> None:
        super().__init__()
        self.window: int | None = None
        self.refuse_in_stream: Literal["error", "failed"] | None = None
        self.serves_compaction = False
        self.issued: set[int] = set()  # compaction items given out, by request number
        self.websocket = False  # True: GET /v1/responses upgrades to the WebSocket transport
        self.socket_messages: list[str] = []  # what came over the WebSocket, as it came
        self._counter = TokenCounter()
        self.app = self._make_app()

    def response_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path == RESPONSES_PATH]

    def prompt_tokens(self, payload: dict[str, Any]) -> int:
        """The fake's count of a prompt: the cl100k tokens of every string in ``instructions`` and
        ``input`` (ids, types and encrypted content aside), 3 per item, and the tools' JSON."""
        strings: list[str] = []
        _strings(payload.get("instructions"), strings)
        _strings(payload.get("input"), strings)
        items = payload.get("input")
        tools = payload.get("tools")
        framing = 3 * (len(items) if isinstance(items, list) else 1)
        listed = self._counter.count_tools(tools) if isinstance(tools, list) else 0
        return sum(self._counter.count_text(text) for text in strings) + framing + listed

    # ------------------------------------------------------------------ scripting

    def reply(
        self,
        text: str | None = None,
        *,
        calls: list[dict[str, Any]] | None = None,
        reasoning: str | None = None,
        pieces: list[str] | None = None,
        usage: dict[str, Any] | None = None,
        delay: float = 0.0,
        ending: Ending | None = None,
        hold: tuple[int, asyncio.Event] | None = None,
    ) -> None:
        """The next request's answer, as JSON or as a stream (as it asks): ``text``, ``calls``, a
        ``reasoning`` item first; ``pieces``: the text's deltas; ``ending`` / ``hold``: how a
        stream stops early or waits (``tests/fakes/serving.py``)."""
        script = Script(text, calls, reasoning, pieces=pieces, usage=usage)

        async def run(ctx: _Ctx) -> web.StreamResponse:
            return await self._answer(ctx, script, delay=delay, ending=ending, hold=hold)

        self._queue_behaviour(run)

    def reply_error(self, status: int, body: dict[str, Any]) -> None:
        async def run(ctx: _Ctx) -> web.StreamResponse:
            return self._json(ctx, body, status, None)

        self._queue_behaviour(run)

    def reply_events(
        self, events: list[dict[str, Any]], *, delay: float = 0.0, gate: asyncio.Event | None = None
    ) -> None:
        """A 200 stream of exactly ``events`` (numbered); ``gate``: the last waits until it is set."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            hold = None if gate is None else (len(events) - 1, gate)
            return await self._sse(ctx, numbered(events), delay=delay, headers=None, hold=hold)

        self._queue_behaviour(run)

    def reply_refusal_in_stream(
        self,
        message: str = TOO_LONG,
        *,
        after_pieces: list[str] | None = None,
        gate: asyncio.Event | None = None,
        delay: float = 0.0,
        failed: bool = False,
    ) -> None:
        """A 200 stream that creates the response (and, with ``after_pieces``, starts a message
        with those deltas), then refuses it as too long: an ``error`` event, or with ``failed`` a
        ``response.failed`` one. ``gate``: the refusal waits until it is set."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            payload = ctx.payload()
            answer = self._made(ctx, Script(text="".join(after_pieces or []) or "x", pieces=after_pieces))
            events = response_events(answer, payload)
            kept = events[: 4 + len(after_pieces)] if after_pieces else events[:2]
            error = {"code": "context_length_exceeded", "message": message}
            if failed:
                response = {**response_object(answer, payload, done=False), "status": "failed", "error": error}
                kept.append({"type": "response.failed", "response": response})
            else:
                kept.append({"type": "error", **error, "param": None})
            hold = None if gate is None else (len(kept) - 1, gate)
            return await self._sse(ctx, numbered(kept), delay=delay, headers=None, hold=hold)

        self._queue_behaviour(run)

    # ------------------------------------------------------------------ serving

    def _make_app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 40)
        app.router.add_post(RESPONSES_PATH, self._route(self._responses))
        app.router.add_post(COMPACT_PATH, self._route(self._compact))
        app.router.add_get(RESPONSES_PATH, self._route(self._socket))
        app.router.add_route("*", "/{tail:.*}", self._route(self._not_found))
        return app

    def _context(self, request: web.Request, recorded: Recorded, number: int, default: Any, started: float) -> _Ctx:
        return _Ctx(request, recorded, number, default)

    async def _responses(self, ctx: _Ctx) -> web.StreamResponse:
        payload = ctx.payload()
        try:
            json.loads(ctx.recorded.body)
        except ValueError:
            return self._json(ctx, openai_error("We could not parse the JSON body of your request."), 400, None)
        problem = check_request(payload, serves_compaction=self.serves_compaction, issued=frozenset(self.issued))
        if problem is not None:
            return self._json(ctx, openai_error(problem), 400, None)
        if self.window is not None and self.prompt_tokens(payload) > self.window:
            return await self._refuse(ctx, payload)
        items = payload.get("input")
        last = items[-1] if isinstance(items, list) and items else {}
        if isinstance(last, dict) and last.get("type") == "compaction_trigger":
            return await self._answer(ctx, Script(compaction=True))
        return await self._answer(ctx, Script())

    async def _refuse(self, ctx: _Ctx, payload: dict[str, Any]) -> web.StreamResponse:
        error = {"code": "context_length_exceeded", "message": TOO_LONG}
        if payload.get("stream") is not True or self.refuse_in_stream is None:
            return self._json(ctx, openai_error(TOO_LONG, param="input", code="context_length_exceeded"), 400, None)
        answer = Answer(str(payload.get("model")), ctx.number)
        events = response_events(answer, payload, opening_only=True)
        if self.refuse_in_stream == "error":
            events.append({"type": "error", **error, "param": None, "sequence_number": 2})
        else:
            failed = {**response_object(answer, payload, done=False), "status": "failed", "error": error}
            events.append({"type": "response.failed", "response": failed, "sequence_number": 2})
        return await self._sse(ctx, events, delay=0.0, headers=None)

    async def _compact(self, ctx: _Ctx) -> web.StreamResponse:
        if not self.serves_compaction:
            return await self._not_found(ctx)
        payload = ctx.payload()
        answer = self._made(ctx, Script(compaction=True))
        kept = [i for i in payload.get("input") or [] if isinstance(i, dict) and i.get("role") == "user"]
        body = {"id": f"cmp_resp{ctx.number:04d}", "object": "response.compaction", "created_at": 1_760_000_000,
                "output": [*kept, *answer.output], "usage": answer.usage}  # fmt: skip
        return self._json(ctx, body, 200, None)

    async def _socket(self, ctx: _Ctx) -> web.StreamResponse:
        """The WebSocket transport: each ``response.create`` message is answered with the events of
        the echo model's response, one text message each; a close ends it."""
        if not self.websocket or ctx.request.headers.get("Upgrade", "").lower() != "websocket":
            return await self._not_found(ctx)
        socket = web.WebSocketResponse(protocols=("responses",))
        await socket.prepare(ctx.request)
        async for message in socket:
            if message.type != WSMsgType.TEXT:
                break
            self.socket_messages.append(message.data)
            payload = json.loads(message.data)
            body = {k: v for k, v in payload.items() if k != "type"}
            answer = Answer(str(body.get("model")), ctx.number)
            answer.add_text("echo: " + _last_user_text(body))
            for event in response_events(answer, body):
                await socket.send_str(json.dumps(event))
        return socket

    async def _not_found(self, ctx: _Ctx) -> web.StreamResponse:
        return self._json(ctx, openai_error(f"Invalid URL ({ctx.request.method} {ctx.request.path})"), 404, None)

    # ------------------------------------------------------------------ answering

    def _made(self, ctx: _Ctx, script: Script) -> Answer:
        payload = ctx.payload()
        answer = Answer(str(payload.get("model") or "gpt-fake"), ctx.number, text_pieces=script.pieces)
        if script.compaction:
            answer.add_compaction()
            self.issued.add(ctx.number)
        if script.reasoning is not None:
            answer.add_reasoning(script.reasoning)
        calls = script.calls
        text = script.text
        if calls is None and text is None and not script.compaction:
            tool = _requested_tool(payload)
            calls = [{"name": tool}] if tool else None
            text = None if tool else "echo: " + _last_user_text(payload)
        if text:
            answer.add_text(text)
        for i, call in enumerate(calls or []):
            arguments = call.get("arguments", '{"q": "x"}')
            answer.add_call(call["name"], arguments, call.get("call_id") or f"call_fake{ctx.number:04d}_{i}")
        prompt = self.prompt_tokens(payload)
        usage = {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 12,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + 12}  # fmt: skip
        answer.usage = script.usage or usage
        return answer

    async def _answer(
        self,
        ctx: _Ctx,
        script: Script,
        *,
        delay: float = 0.0,
        ending: Ending | None = None,
        hold: tuple[int, asyncio.Event] | None = None,
    ) -> web.StreamResponse:
        payload = ctx.payload()
        answer = self._made(ctx, script)
        if payload.get("stream") is True:
            events = response_events(answer, payload)
            return await self._sse(ctx, events, delay=delay, headers=None, ending=ending, hold=hold)
        return self._json(ctx, response_object(answer, payload), 200, None)

    def _headers(self, ctx: _Ctx) -> dict[str, str]:
        return {"x-request-id": f"req_{ctx.number}", "openai-version": "2020-10-01"}

    def _event_bytes(self, event: Any) -> bytes:
        return sse_bytes(event)


def _strings(value: Any, out: list[str]) -> None:
    """Every string in ``value`` but ids, types and encrypted content."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for inner in value:
            _strings(inner, out)
    elif isinstance(value, dict):
        for key, inner in value.items():
            if key not in ("id", "type", "call_id", "encrypted_content", "status", "role"):
                _strings(inner, out)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


def _last_user_text(payload: dict[str, Any]) -> str:
    items = payload.get("input")
    if isinstance(items, str):
        return items
    for item in reversed(items or []):
        if isinstance(item, dict) and item.get("role") == "user":
            return _text(item.get("content"))
    return ""


def _requested_tool(payload: dict[str, Any]) -> str | None:
    items = payload.get("input")
    if not payload.get("tools") or not isinstance(items, list) or not items:
        return None
    if not isinstance(items[-1], dict) or items[-1].get("role") != "user":
        return None
    match = _CALL_TOOL.search(_text(items[-1].get("content")))
    return match.group(1) if match else None


async def start_fake_responses(aiohttp_server: Any) -> tuple[FakeResponses, TestServer]:
    fake = FakeResponses()
    server: TestServer = await aiohttp_server(fake.app)
    return fake, server

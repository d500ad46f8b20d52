"""A fake Anthropic upstream: a real aiohttp application speaking the Messages API on loopback.

It answers as api.anthropic.com does and records every request, so tests can point ctxproxy (or
the ``anthropic`` SDK, ``base_url=str(server.make_url(""))``) at it and assert on the wire::

    fake, server = await start_fake_anthropic(aiohttp_server)
    fake.reply_stream(["Hel", "lo"])          # script the next /v1/messages request
    ...
    assert credential(fake.message_requests()[0].headers) == "sk-ant-test"

Routes: ``POST /v1/messages`` runs the next scripted behaviour, else it validates the request like
the real API (``anthropic_checks``; 400 ``invalid_request_error``), refuses a prompt that does not
fit :attr:`FakeAnthropic.window`, and answers as the echo model (``anthropic_echo``), as JSON or,
for ``"stream": true``, as events. ``POST /v1/messages/count_tokens`` answers ``{"input_tokens":
N}``. Any other path: 404 ``not_found_error``. Every reply_* call queues ONE behaviour, consumed
FIFO by the next request to its path (``/v1/messages`` unless chained after ``for_path(path)``).
A standing ``answer_when(respond)`` answers every unscripted Messages request for which
``respond(payload)`` gives a text (a summariser's call, told apart by its prompt) with that text,
however many requests come before it.

Headers: no ``anthropic-version`` is a 400, as on the real API; with :attr:`FakeAnthropic.api_key`
set, another key (``x-api-key``, or an ``Authorization: Bearer`` token as SDK 2.x sends it) is a
401. Answers (but ``reply_raw``'s) carry ``request-id: req_fake<n>``, n the 1-based position in
:attr:`FakeAnthropic.requests`; the fake's own refusals also carry it as the body's ``request_id``,
as Anthropic's do (scripted errors are sent exactly as given). Usage: ``input_tokens`` and the cache counts from
:class:`PromptMeter` (its own count and a simulated prompt cache), ``output_tokens`` a token per 4
characters said.

Abrupt endings and disconnects work as in the OpenAI fake (``tests/fakes/upstream.py``):
``cut_after`` closes the socket mid-body (``ClientPayloadError`` for the reader), ``end_after`` ends
cleanly without ``message_stop``, ``half_event`` writes half of the next event first,
``reply_reset`` closes before any byte; a client going away counts in ``cancellations`` and sets
``cancelled``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDictProxy

from tests.fakes.anthropic_checks import check_request
from tests.fakes.anthropic_echo import Script, answer_for
from tests.fakes.anthropic_prompt import AnthropicWindow, PromptMeter
from tests.fakes.anthropic_wire import (
    Answer,
    SseEvent,
    anthropic_error,
    message_object,
    sse_bytes,
    stream_events,
)
from tests.fakes.serving import Ending, Recorded, ScriptedFake, drop_connection

__all__ = [
    "COUNT_PATH",
    "MESSAGES_PATH",
    "AnthropicWindow",
    "FakeAnthropic",
    "anthropic_error",
    "credential",
    "start_fake_anthropic",
]

MESSAGES_PATH = "/v1/messages"
COUNT_PATH = "/v1/messages/count_tokens"


@dataclass
class _Ctx:
    request: web.Request
    recorded: Recorded
    number: int
    default: Behaviour

    def payload(self) -> dict[str, Any]:
        """The request body as a JSON object, or {} when it is not one."""
        return self.recorded.payload()

    @property
    def message_id(self) -> str:
        return f"msg_fake{self.number:04d}"


Behaviour = Callable[[_Ctx], Awaitable[web.StreamResponse]]


class FakeAnthropic(ScriptedFake):
    """Fake api.anthropic.com. Serve :attr:`app`, script replies, inspect :attr:`requests`
    (``for_path`` and ``pending``: see ``tests/fakes/serving.py``)."""

    default_path = MESSAGES_PATH
    stream_headers: ClassVar[dict[str, str]] = {
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache",
    }

    def __init__(self) -> None:
        super().__init__()
        self.api_key: str | None = None  # set: the request's credential (see `credential`) must equal it
        self.strict_roles = True  # False: consecutive same-role turns are merged, as today's API does
        self.window: AnthropicWindow | None = None
        self.meter = PromptMeter()
        self._responders: list[Callable[[dict[str, Any]], str | None]] = []
        self.app = self._make_app()

    # ------------------------------------------------------------------ inspection

    def message_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path == MESSAGES_PATH]

    def prompt_tokens(self, payload: dict[str, Any]) -> int:
        """The prompt as this upstream counts it (``count_tokens``, the window)."""
        return self.meter.count(payload)

    # ------------------------------------------------------------------ scripting

    def answer_when(self, respond: Callable[[dict[str, Any]], str | None]) -> None:
        """From now on, answer every unscripted, valid Messages request for which ``respond(payload)``
        gives a text with that text, as JSON or as a stream (the first responder that answers wins)."""
        self._responders.append(respond)

    def reply_json(
        self,
        text: str | None = None,
        *,
        tool_uses: list[dict[str, Any]] | None = None,
        thinking: str | None = None,
        stop_reason: str | None = None,
        usage: dict[str, int] | None = None,
        model: str | None = None,
        status: int = 200,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer with a Message object. ``text`` None: the echo text (none when ``tool_uses`` are
        given). ``tool_uses``: ``{"name", "input", "id"?}`` items. ``thinking``: a thinking block
        first. ``usage`` replaces the computed usage; ``model`` defaults to the request's."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            answer = self._answer(ctx, Script(text, tool_uses, thinking, stop_reason, usage, model))
            return self._json(ctx, message_object(answer, ctx.message_id), status, headers)

        self._queue_behaviour(run)

    def reply_stream(
        self,
        pieces: list[str] | None = None,
        *,
        tool_uses: list[dict[str, Any]] | None = None,
        thinking: str | None = None,
        stop_reason: str | None = None,
        usage: dict[str, int] | None = None,
        delay: float = 0.0,
        cut_after: int | None = None,
        end_after: int | None = None,
        half_event: bool = False,
        headers: dict[str, str] | None = None,
        hold: tuple[int, asyncio.Event] | None = None,
    ) -> None:
        """Answer with the event stream of a Message. ``pieces``: the text deltas (None: the echo
        text a word a delta). ``delay`` seconds between events. ``cut_after=n`` / ``end_after=n``:
        stop after ``n`` events, cutting the connection or ending cleanly; ``half_event``: half of
        the next event is written first. ``hold``: ``(i, event)``, event number ``i`` (0:
        ``message_start``) waits until ``event`` is set."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            text = None if pieces is None else "".join(pieces)
            answer = self._answer(ctx, Script(text, tool_uses, thinking, stop_reason, usage))
            events = stream_events(answer, ctx.message_id, text_pieces=pieces)
            ending = Ending(cut_after, end_after, half_event)
            return await self._sse(ctx, events, delay=delay, headers=headers, ending=ending, hold=hold)

        self._queue_behaviour(run)

    def reply_error(self, status: int, body: dict[str, Any] | str, *, headers: dict[str, str] | None = None) -> None:
        """Answer ``status`` with ``body``: a dict as JSON exactly as given (see
        :func:`anthropic_error`), a str as ``text/plain`` (an HTML or proxy error page)."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            if isinstance(body, str):
                return web.Response(status=status, text=body, headers={**self._headers(ctx), **(headers or {})})
            return self._json(ctx, body, status, headers)

        self._queue_behaviour(run)

    def reply_sse_error(
        self,
        error_type: str = "overloaded_error",
        message: str = "Overloaded",
        *,
        after_pieces: list[str] | None = None,
        gate: asyncio.Event | None = None,
        ping: bool = False,
        delay: float = 0.0,
    ) -> None:
        """A 200 stream that starts the message (and a text block with ``after_pieces`` deltas),
        then sends ``event: error`` and ends without ``message_stop``, as Anthropic does when it is
        overloaded mid-stream. ``gate``: the error event waits until it is set. ``ping``: a
        ``ping`` follows ``message_start``; ``delay`` seconds between events."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            answer = self._answer(ctx, Script("".join(after_pieces or []) or "x"))
            events = stream_events(answer, ctx.message_id, text_pieces=after_pieces or [], ping=False)
            kept = events[: 2 + len(after_pieces or [])] if after_pieces else events[:1]
            if ping:
                kept.insert(1, ("ping", {"type": "ping"}))
            kept.append(("error", anthropic_error(message, error_type)))
            hold = None if gate is None else (len(kept) - 1, gate)
            return await self._sse(ctx, kept, delay=delay, headers=None, hold=hold)

        self._queue_behaviour(run)

    def reply_delay(self, seconds: float, then: Literal["json", "stream", "auto"] = "auto") -> None:
        """Sleep ``seconds`` (a client disconnect meanwhile sets :attr:`cancelled`), then answer with
        the echo as JSON, as a stream, or (``"auto"``) as the route's default would."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            await asyncio.sleep(seconds)
            if then == "auto" or ctx.request.path != MESSAGES_PATH:
                return await ctx.default(ctx)
            answer = self._answer(ctx)
            if then == "stream":
                return await self._sse(ctx, stream_events(answer, ctx.message_id), delay=0.0, headers=None)
            return self._json(ctx, message_object(answer, ctx.message_id), 200, None)

        self._queue_behaviour(run)

    def reply_reset(self) -> None:
        """Close the connection without sending any response byte."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            drop_connection(ctx.request)
            return web.Response(status=599)  # never sent: the transport is closed

        self._queue_behaviour(run)

    def reply_raw(self, status: int, body: bytes, *, headers: dict[str, str]) -> None:
        """Send exactly ``status``, ``headers`` and ``body``."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            return web.Response(status=status, body=body, headers=headers)

        self._queue_behaviour(run)

    # ------------------------------------------------------------------ serving

    def _make_app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 40)
        app.router.add_post(MESSAGES_PATH, self._route(self._messages))
        app.router.add_post(COUNT_PATH, self._route(self._count_tokens))
        app.router.add_route("*", "/{tail:.*}", self._route(self._not_found))
        return app

    def _context(self, request: web.Request, recorded: Recorded, number: int, default: Any, started: float) -> _Ctx:
        return _Ctx(request, recorded, number, default)

    # ------------------------------------------------------------------ defaults

    def _refuse(self, ctx: _Ctx, *, count_only: bool) -> web.Response | None:
        """The error answer for a request the real API would refuse, else None."""
        headers = ctx.recorded.headers
        if self.api_key is not None and credential(headers) != self.api_key:
            return self._error(ctx, 401, "invalid x-api-key", "authentication_error")
        if "anthropic-version" not in headers:
            return self._error(ctx, 400, "anthropic-version: header is required")
        try:
            payload = json.loads(ctx.recorded.body)
        except ValueError as exc:
            return self._error(ctx, 400, f"There was an issue with the JSON of your request: {exc}")
        beta = ",".join(headers.getall("anthropic-beta", ()))
        problem = check_request(
            payload,
            needs_max_tokens=not count_only,
            strict_roles=self.strict_roles,
            system_messages="mid-conversation-system-" in beta,
        )
        return None if problem is None else self._error(ctx, 400, problem)

    async def _messages(self, ctx: _Ctx) -> web.StreamResponse:
        refused = self._refuse(ctx, count_only=False)
        if refused is not None:
            return refused
        payload = ctx.payload()
        streaming = payload.get("stream") is True
        refusal = self.window.refusal(self.meter.count(payload), payload["max_tokens"]) if self.window else None
        if refusal is not None and self.window is not None:
            if self.window.in_stream and streaming:
                return await self._sse(ctx, [("error", anthropic_error(refusal))], delay=0.0, headers=None)
            return self._error(ctx, 400, refusal)
        said = next((text for respond in self._responders if (text := respond(payload)) is not None), None)
        answer = self._answer(ctx, Script(said))
        if streaming:
            return await self._sse(ctx, stream_events(answer, ctx.message_id), delay=0.0, headers=None)
        return self._json(ctx, message_object(answer, ctx.message_id), 200, None)

    async def _count_tokens(self, ctx: _Ctx) -> web.StreamResponse:
        refused = self._refuse(ctx, count_only=True)
        if refused is not None:
            return refused
        return self._json(ctx, {"input_tokens": self.meter.count(ctx.payload())}, 200, None)

    async def _not_found(self, ctx: _Ctx) -> web.StreamResponse:
        return self._error(ctx, 404, "Not Found", "not_found_error")

    def _answer(self, ctx: _Ctx, script: Script | None = None) -> Answer:
        return answer_for(ctx.payload(), script or Script(), ctx.number, self.meter)

    # ------------------------------------------------------------------ writing

    def _headers(self, ctx: _Ctx) -> dict[str, str]:
        return {"request-id": f"req_fake{ctx.number:04d}", "anthropic-organization-id": "org-fake"}

    def _error(self, ctx: _Ctx, status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
        """The API's own refusal: the error body with the ``request_id`` Anthropic adds to it."""
        body = {**anthropic_error(message, kind), "request_id": self._headers(ctx)["request-id"]}
        return self._json(ctx, body, status, None)

    def _event_bytes(self, event: SseEvent) -> bytes:
        return sse_bytes(event)


def credential(headers: CIMultiDictProxy[str]) -> str | None:
    """The API key a request presents: ``x-api-key`` (the documented header, which SDKs before 2.x
    send), else an ``Authorization: Bearer`` token (what SDK 2.x sends for ``api_key``)."""
    key = headers.get("x-api-key")
    if key is not None:
        return key
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


async def start_fake_anthropic(aiohttp_server: Any) -> tuple[FakeAnthropic, TestServer]:
    """Serve a new :class:`FakeAnthropic` with pytest-aiohttp's ``aiohttp_server`` fixture. The SDK's
    base URL is ``str(server.make_url(""))`` (it adds ``/v1/messages`` itself)."""
    fake = FakeAnthropic()
    server: TestServer = await aiohttp_server(fake.app)
    return fake, server

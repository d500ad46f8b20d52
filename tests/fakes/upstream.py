"""A fake OpenAI upstream: a real aiohttp application that tests serve on loopback.

It answers in the same wire format as api.openai.com and records every request it
receives, so tests can point the proxy (or the ``openai`` SDK) at it and then assert
on what went over the wire in both directions.

Usage::

    fake, server = await start_fake_upstream(aiohttp_server)
    base_url = str(server.make_url("/v1"))      # e.g. http://127.0.0.1:PORT/v1
    fake.reply_stream(["Hel", "lo"], delay=0.05)  # script the next chat request
    ...                                          # exercise the proxy
    assert fake.chat_requests()[0].json()["model"] == "gpt-4o-mini"

Routes:

* ``POST /v1/chat/completions``: the next scripted behaviour, else the default echo
  completion (see :meth:`FakeUpstream.reply_json` for what "echo" means) — or, with
  :attr:`FakeUpstream.window` set, an overflow error for a prompt larger than its limit; a
  model named in :attr:`FakeUpstream.model_answers` gets its own answer (held until its
  event is set, when it has one).
* ``GET /v1/models``: a models list, unless a behaviour was queued for that path.
* ``POST /v1/embeddings``: with :attr:`FakeUpstream.embedder` set (text -> vector), one
  embedding per input; else like any other path.
* any method on any other path: a behaviour queued with :meth:`FakeUpstream.for_path`,
  else a JSON description of the request (method, path, query, headers, sha256 and
  length of the body). Bodies are read in chunks, so large uploads work.

Scripting: every ``reply_*`` call queues ONE behaviour, consumed by the next request to
its path (FIFO per path). Behaviours apply to ``/v1/chat/completions`` unless the call
is chained after ``for_path(path)``. An empty queue means the route's default answer.

Every response except :meth:`FakeUpstream.reply_raw` carries ``x-request-id: req_<n>``
(``n`` = 1-based position of the request in :attr:`FakeUpstream.requests`),
``openai-processing-ms`` and ``openai-version``, like the real API.

Abrupt endings, which proxies must treat as upstream failures:

* ``reply_stream(cut_after=n)`` writes ``n`` SSE events, then closes the socket
  without the terminating zero-length chunk: an aiohttp client reading the body gets
  ``aiohttp.ClientPayloadError`` (``TransferEncodingError``), never a clean EOF.
* ``reply_reset()`` closes the socket before any byte of the response: an aiohttp
  client gets ``aiohttp.ServerDisconnectedError``.
* ``reply_stream(end_after=n)`` writes ``n`` SSE events, then ends the response
  cleanly (terminating chunk sent) without the rest of the stream and without
  ``[DONE]``: the reader sees a clean EOF, so only the missing ``[DONE]`` says the
  stream is incomplete.
* ``half_event=True`` (with ``cut_after`` or ``end_after``) also writes the first half
  of the next event's bytes before the ending, so the stream stops mid-event.

Client disconnects: the test server runs with ``handler_cancellation=True`` (always the
case for ``aiohttp_server``/``TestServer``), so when the proxy drops its upstream
connection the handler is cancelled; the fake then increments ``cancellations`` and
sets ``cancelled``. A write that fails because the client is gone counts the same way.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer

from ctxproxy.session import message_digest
from ctxproxy.tokens import TokenCounter
from tests.fakes.serving import GATE_TIMEOUT, Ending, Recorded, ScriptedFake, drop_connection

__all__ = [
    "CHAT_PATH",
    "FakeUpstream",
    "FakeWindow",
    "Recorded",
    "openai_error",
    "start_fake_upstream",
]

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
EMBEDDINGS_PATH = "/v1/embeddings"
DEFAULT_MODEL = "gpt-4o-mini"
KEEPALIVE = b": keep-alive\n\n"  # an SSE comment, as servers send to keep a connection open
SYSTEM_FINGERPRINT = "fp_fake0001"
TOOL_ARGUMENTS = '{"q": "x"}'
_CALL_TOOL = re.compile(r"CALL_TOOL:([A-Za-z0-9_.-]+)")


@dataclass(frozen=True)
class FakeWindow:
    """A model with a small context window, for :attr:`FakeUpstream.window`: a chat request whose
    prompt (its messages' text, ``chars_per_token`` characters a token; or, with ``count_ratio``,
    that many times ctxproxy's own count) is over ``limit`` is answered 400 with
    ``refusal(limit, prompt)`` (a JSON body, or text sent as ``text/plain``)."""

    limit: int
    refusal: Callable[[int, int], dict[str, Any] | str]
    chars_per_token: float = 3.2
    count_ratio: float | None = None

    def prompt_tokens(self, payload: dict[str, Any]) -> int:
        messages = payload.get("messages") or []
        chars = sum(len(_text_of(m.get("content"))) for m in messages if isinstance(m, dict))
        return int(chars / self.chars_per_token) + 1


@dataclass
class _Ctx:
    """What a behaviour needs to answer one request."""

    request: web.Request
    recorded: Recorded
    number: int  # 1-based index in FakeUpstream.requests
    started: float
    default: Behaviour

    def payload(self) -> dict[str, Any]:
        """The request body as a JSON object, or {} when it is not one."""
        return self.recorded.payload()


Behaviour = Callable[[_Ctx], Awaitable[web.StreamResponse]]


@dataclass
class _Reply:
    """A completion to send: what the model "said" and how it was billed."""

    model: str
    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    reasoning: str | None = None  # ``reasoning_content``
    reasoning_pieces: list[str] | None = None  # its deltas, when streamed


def openai_error(
    message: str,
    *,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """An error body exactly as OpenAI sends it: ``{"error": {message, type, param, code}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class FakeUpstream(ScriptedFake):
    """Fake api.openai.com. Serve :attr:`app`, script replies, inspect :attr:`requests`
    (``for_path`` and ``pending``: see ``tests/fakes/serving.py``)."""

    default_path = CHAT_PATH

    def __init__(self) -> None:
        super().__init__()
        self.embedder: Callable[[str], list[float]] | None = None
        self.window: FakeWindow | None = None  # set: the default chat answer refuses larger prompts
        # usage.prompt_tokens: ``count_ratio`` times ctxproxy's own count of the prompt (messages and
        # tools); with :attr:`window` set, the window's count.
        self.count_ratio = 1.0
        # set: like a server with a small context that truncates silently (Ollama's num_ctx), the
        # prompt is cut to this many tokens without an error, and usage says so.
        self.truncate_at: int | None = None
        # A model of its own (a summary model, say): unscripted chat requests for a model named
        # here are answered with this content instead of the echo, once its event (if any) is set.
        self.model_answers: dict[str, tuple[str, asyncio.Event | None]] = {}
        self._counter = TokenCounter()
        self.app = self._make_app()

    # ------------------------------------------------------------------ inspection

    def chat_requests(self) -> list[Recorded]:
        """The recorded ``POST /v1/chat/completions`` requests, in order."""
        return [r for r in self.requests if r.path == CHAT_PATH]

    # ------------------------------------------------------------------ scripting

    def reply_json(
        self,
        content: str | None = None,
        *,
        tool_calls: list[dict[str, Any]] | None = None,
        usage: dict[str, Any] | None = None,
        status: int = 200,
        headers: dict[str, str] | None = None,
        model: str | None = None,
        reasoning: str | None = None,
        ids: bool = True,
    ) -> None:
        """Answer with a ``chat.completion`` object (never streamed).

        ``content=None`` means the echo text (``"echo: " + last user message``), or
        ``null`` when ``tool_calls`` are given. ``tool_calls`` items look like
        ``{"id", "type": "function", "function": {"name", "arguments"}}``; a missing
        id/type is filled in. ``usage`` replaces the computed usage object; ``model``
        defaults to the request's model. ``reasoning``: the message's ``reasoning_content``
        (as DeepSeek sends it). ``ids=False``: tool calls go without ``id`` (some
        OpenAI-compatible servers leave it out).
        """

        async def run(ctx: _Ctx) -> web.StreamResponse:
            reply = self._reply_for(ctx, content, tool_calls, usage, model)
            reply = _Reply(reply.model, reply.content, _with_ids(reply.tool_calls, ids), reply.usage, reasoning)
            return self._json(ctx, self._completion(ctx, reply), status, headers)

        self._queue_behaviour(run)

    def reply_stream(
        self,
        pieces: list[str] | None = None,
        *,
        tool_calls: list[dict[str, Any]] | None = None,
        delay: float = 0.0,
        cut_after: int | None = None,
        end_after: int | None = None,
        half_event: bool = False,
        headers: dict[str, str] | None = None,
        reasoning: list[str] | None = None,
        ids: bool = True,
        hold: tuple[int, asyncio.Event] | None = None,
    ) -> None:
        """Answer with an SSE stream of ``chat.completion.chunk`` events.

        ``pieces`` are the content deltas (None: the echo text split into words, or no
        content when ``tool_calls`` are given). Tool calls are streamed incrementally
        with their arguments split into at least two deltas. ``delay`` seconds pass
        between events. ``cut_after=n`` closes the connection after ``n`` data events
        without the chunked terminator (``n`` past the last event: the whole stream,
        ``[DONE]`` included, is sent and the body is still cut). ``end_after=n`` ends
        the response cleanly after ``n`` data events (no ``[DONE]``, no transport error).
        ``half_event``: with either, half of the next event is written before the end.
        ``reasoning``: ``reasoning_content`` deltas, before the content. ``ids=False``: tool
        calls start without ``id``. ``stream_options.include_usage`` of the request is honoured.
        ``hold``: ``(i, event)``, event number ``i`` (0: the role chunk) waits until ``event`` is set.
        """

        async def run(ctx: _Ctx) -> web.StreamResponse:
            text = None if pieces is None else "".join(pieces)
            reply = self._reply_for(ctx, text, tool_calls, None, None)
            said = "".join(reasoning) if reasoning is not None else None
            reply = _Reply(reply.model, reply.content, _with_ids(reply.tool_calls, ids), reply.usage, said, reasoning)
            split = pieces if pieces is not None else _words(reply.content or "")
            events = self._stream_events(ctx, reply, split)
            ending = Ending(cut_after, end_after, half_event)
            return await self._sse(ctx, events, delay=delay, headers=headers, ending=ending, hold=hold)

        self._queue_behaviour(run)

    def reply_error(self, status: int, body: dict[str, Any] | str, *, headers: dict[str, str] | None = None) -> None:
        """Answer ``status`` with ``body``: a dict is sent as JSON exactly as given (see
        :func:`openai_error`), a str as-is with ``text/plain`` (non-JSON error pages)."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            if isinstance(body, str):
                merged = {**self._headers(ctx), **(headers or {})}
                return web.Response(status=status, text=body, headers=merged)
            return self._json(ctx, body, status, headers)

        self._queue_behaviour(run)

    def reply_sse_error(
        self,
        error: dict[str, Any],
        *,
        after_pieces: list[str] | None = None,
        gate: asyncio.Event | None = None,
        keepalive: bool = False,
        delay: float = 0.0,
    ) -> None:
        """A 200 ``text/event-stream`` that sends the role chunk and ``after_pieces``
        content deltas, then ``data: {"error": error}`` and ends cleanly without
        ``[DONE]``. ``error`` is the inner object (``{"message", "type", ...}``); a dict
        that already has an ``"error"`` key is sent unchanged. ``gate``: the error event
        waits until it is set (at most ``GATE_TIMEOUT`` seconds), so a test can first read
        the content deltas where they arrive and only then let the error follow.
        ``keepalive``: a comment (``: keep-alive``) comes first; ``delay`` seconds between events."""
        wrapped = error if "error" in error else {"error": error}

        async def run(ctx: _Ctx) -> web.StreamResponse:
            reply = self._reply_for(ctx, "".join(after_pieces or []), None, None, None)
            chunks = _ChunkMaker(ctx, reply.model, include_usage=False)
            events: list[Any] = [KEEPALIVE] if keepalive else []
            events.append(chunks.make({"role": "assistant", "content": "", "refusal": None}))
            events += [chunks.make({"content": p}) for p in after_pieces or []]
            events.append(wrapped)
            hold = None if gate is None else (len(events) - 1, gate)
            return await self._sse(ctx, events, delay=delay, headers=None, hold=hold)

        self._queue_behaviour(run)

    def reply_delay(self, seconds: float, then: Literal["json", "stream", "auto"] = "json") -> None:
        """Sleep ``seconds`` before answering; a client disconnect during the sleep sets
        :attr:`cancelled`. Then: ``"json"`` the echo completion as JSON (on other paths,
        the path's default answer), ``"stream"`` the streamed echo, ``"auto"`` the
        route's default (streams iff the request asked for ``"stream": true``)."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            await asyncio.sleep(seconds)
            if then == "stream":
                return await self._echo_stream(ctx)
            if then == "json" and ctx.request.path == CHAT_PATH:
                return self._json(ctx, self._completion(ctx, self._reply_for(ctx)), 200, None)
            return await ctx.default(ctx)

        self._queue_behaviour(run)

    def reply_reset(self) -> None:
        """Close the connection without sending any response byte."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            drop_connection(ctx.request)
            # Never sent: aiohttp fails to write it to the closed transport and ends
            # the connection quietly.
            return web.Response(status=599)

        self._queue_behaviour(run)

    def reply_raw(self, status: int, body: bytes, *, headers: dict[str, str]) -> None:
        """Send exactly ``status``, ``headers`` and ``body`` (aiohttp still adds
        Content-Length, Date and Server). E.g. a gzip body with
        ``{"Content-Encoding": "gzip", "Content-Type": "application/json"}``."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            return web.Response(status=status, body=body, headers=headers)

        self._queue_behaviour(run)

    # ------------------------------------------------------------------ serving

    def _make_app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 40)  # bodies are streamed anyway
        app.router.add_post(CHAT_PATH, self._route(self._echo_chat))
        app.router.add_get(MODELS_PATH, self._route(self._models))
        app.router.add_post(EMBEDDINGS_PATH, self._route(self._embeddings))
        app.router.add_route("*", "/{tail:.*}", self._route(self._echo_request))
        return app

    def _context(self, request: web.Request, recorded: Recorded, number: int, default: Any, started: float) -> _Ctx:
        return _Ctx(request, recorded, number, started, default)

    # ------------------------------------------------------------------ defaults

    async def _echo_chat(self, ctx: _Ctx) -> web.StreamResponse:
        error = _validate_chat(ctx)
        if error is not None:
            return self._json(ctx, error, 400, None)
        answer = self.model_answers.get(str(ctx.payload().get("model")))
        if answer is not None:
            if answer[1] is not None:
                await asyncio.wait_for(answer[1].wait(), GATE_TIMEOUT)
            return self._json(ctx, self._completion(ctx, self._reply_for(ctx, answer[0])), 200, None)
        if self.window is not None and (prompt := self.prompt_tokens(ctx.payload())) > self.window.limit:
            refusal = self.window.refusal(self.window.limit, prompt)
            if isinstance(refusal, str):
                return web.Response(status=400, text=refusal, headers=self._headers(ctx))
            return self._json(ctx, refusal, 400, None)
        if ctx.payload().get("stream") is True:
            return await self._echo_stream(ctx)
        return self._json(ctx, self._completion(ctx, self._reply_for(ctx)), 200, None)

    async def _echo_stream(self, ctx: _Ctx) -> web.StreamResponse:
        reply = self._reply_for(ctx)
        events = self._stream_events(ctx, reply, _words(reply.content or ""))
        return await self._sse(ctx, events, delay=0.0, headers=None)

    async def _embeddings(self, ctx: _Ctx) -> web.StreamResponse:
        """With :attr:`embedder` set, an embeddings list (one vector per input, in order);
        else the request description, as on any unscripted path."""
        if self.embedder is None:
            return await self._echo_request(ctx)
        given = ctx.payload().get("input")
        texts = [given] if isinstance(given, str) else [str(t) for t in given or []]
        data = [{"object": "embedding", "index": i, "embedding": self.embedder(t)} for i, t in enumerate(texts)]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return self._json(ctx, {"object": "list", "data": data, "model": "fake-embed", "usage": usage}, 200, None)

    async def _models(self, ctx: _Ctx) -> web.StreamResponse:
        models = [
            {"id": "gpt-4o-mini", "object": "model", "created": 1721172741, "owned_by": "openai"},
            {"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "openai"},
        ]
        return self._json(ctx, {"object": "list", "data": models}, 200, None)

    async def _echo_request(self, ctx: _Ctx) -> web.StreamResponse:
        rec = ctx.recorded
        headers: dict[str, str] = {}
        for name, value in rec.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        described = {
            "method": rec.method,
            "path": rec.path,
            "query": rec.query_string,
            "headers": headers,
            "body_sha256": hashlib.sha256(rec.body).hexdigest(),
            "body_len": len(rec.body),
        }
        return self._json(ctx, described, 200, None)

    # ------------------------------------------------------------------ building replies

    def prompt_tokens(self, payload: dict[str, Any]) -> int:
        """How this upstream counts a prompt (its answers' ``usage.prompt_tokens``)."""
        window = self.window
        if window is not None and window.count_ratio is None:
            return window.prompt_tokens(payload)
        ratio = self.count_ratio if window is None or window.count_ratio is None else window.count_ratio
        messages = [m for m in payload.get("messages") or [] if isinstance(m, dict)]
        tools = payload.get("tools")
        ours = self._counter.count_messages(messages, [message_digest(m) for m in messages]) + (
            self._counter.count_tools(tools) if isinstance(tools, list) else 0
        )
        return round(ours * ratio)

    def _reply_for(
        self,
        ctx: _Ctx,
        content: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        usage: dict[str, Any] | None = None,
        model: str | None = None,
    ) -> _Reply:
        """Scripted values where given, else what the echo model would answer."""
        payload = ctx.payload()
        messages = [m for m in payload.get("messages") or [] if isinstance(m, dict)]
        model = model or str(payload.get("model") or DEFAULT_MODEL)
        if tool_calls is not None:
            calls = [_normalise_call(c, ctx.number, i) for i, c in enumerate(tool_calls)]
            return _Reply(model, content, calls, usage)
        if content is None:
            tool = _requested_tool(payload, messages)
            if tool is not None:
                call = {
                    "id": f"call_{ctx.number}_0",
                    "type": "function",
                    "function": {"name": tool, "arguments": TOOL_ARGUMENTS},
                }
                return _Reply(model, None, [call], usage)
            content = "echo: " + _last_user_text(messages)
        return _Reply(model, content, [], usage)

    def _usage(self, ctx: _Ctx, reply: _Reply) -> dict[str, Any]:
        if reply.usage is not None:
            return reply.usage
        prompt = self.prompt_tokens(ctx.payload())
        if self.truncate_at is not None:
            prompt = min(prompt, self.truncate_at)
        said = (reply.content or "") + "".join(c["function"]["arguments"] for c in reply.tool_calls)
        completion = max(1, len(said) // 4)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def _completion(self, ctx: _Ctx, reply: _Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        message["annotations"] = []
        return {
            "id": f"chatcmpl-fake{ctx.number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                }
            ],
            "usage": self._usage(ctx, reply),
            "service_tier": "default",
            "system_fingerprint": SYSTEM_FINGERPRINT,
        }

    def _stream_events(self, ctx: _Ctx, reply: _Reply, pieces: list[str]) -> list[Any]:
        """Chunk objects in OpenAI's order, then the ``"[DONE]"`` sentinel."""
        options = ctx.payload().get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        chunks = _ChunkMaker(ctx, reply.model, include_usage)
        events: list[Any] = [chunks.make({"role": "assistant", "content": "", "refusal": None})]
        events += [chunks.make({"reasoning_content": piece}) for piece in reply.reasoning_pieces or []]
        events += [chunks.make({"content": piece}) for piece in pieces]
        for i, call in enumerate(reply.tool_calls):
            events.append(chunks.make({"tool_calls": [_tool_call_start(i, call)]}))
            for part in _split_arguments(call["function"]["arguments"]):
                events.append(chunks.make({"tool_calls": [{"index": i, "function": {"arguments": part}}]}))
        finish = "tool_calls" if reply.tool_calls else "stop"
        events.append(chunks.make({}, finish_reason=finish))
        if include_usage:
            events.append(chunks.usage(self._usage(ctx, reply)))
        events.append("[DONE]")
        return events

    # ------------------------------------------------------------------ writing

    def _headers(self, ctx: _Ctx) -> dict[str, str]:
        elapsed_ms = int((time.monotonic() - ctx.started) * 1000)
        return {
            "x-request-id": f"req_{ctx.number}",
            "openai-processing-ms": str(elapsed_ms),
            "openai-version": "2020-10-01",
        }

    def _event_bytes(self, event: Any) -> bytes:
        return _sse_event(event)


class _ChunkMaker:
    """Builds the ``chat.completion.chunk`` objects of one stream."""

    def __init__(self, ctx: _Ctx, model: str, include_usage: bool) -> None:
        self._base: dict[str, Any] = {
            "id": f"chatcmpl-fake{ctx.number}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "service_tier": "default",
            "system_fingerprint": SYSTEM_FINGERPRINT,
        }
        self._include_usage = include_usage

    def make(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        chunk = {**self._base, "choices": [choice]}
        if self._include_usage:
            chunk["usage"] = None
        return chunk

    def usage(self, usage: dict[str, Any]) -> dict[str, Any]:
        return {**self._base, "choices": [], "usage": usage}


# ---------------------------------------------------------------------- helpers


def _sse_event(event: Any) -> bytes:
    if isinstance(event, bytes):  # already an event, as it goes on the wire
        return event
    data = event.encode() if isinstance(event, str) else orjson.dumps(event)
    return b"data: " + data + b"\n\n"


def _text_of(content: Any) -> str:
    """Text of a message content: a string, or the concatenated ``text`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def _requested_tool(payload: dict[str, Any], messages: list[dict[str, Any]]) -> str | None:
    """``name`` when the request has tools and its last message is a user message
    containing ``CALL_TOOL:<name>``."""
    if not payload.get("tools") or not messages or messages[-1].get("role") != "user":
        return None
    match = _CALL_TOOL.search(_text_of(messages[-1].get("content")))
    return match.group(1) if match else None


def _validate_chat(ctx: _Ctx) -> dict[str, Any] | None:
    try:
        ctx.recorded.json()
    except ValueError:
        return openai_error(
            "We could not parse the JSON body of your request. (HINT: This likely means you"
            " aren't using your HTTP library correctly. The OpenAI API expects a JSON"
            " payload, but what was sent was not valid JSON.)"
        )
    payload = ctx.payload()
    for name in ("model", "messages"):
        if name not in payload:
            return openai_error(
                f"Missing required parameter: '{name}'.",
                param=name,
                code="missing_required_parameter",
            )
    return None


def _words(text: str) -> list[str]:
    """Split into word deltas that concatenate back to ``text`` exactly."""
    return [w for w in re.split(r"(?<=\s)(?=\S)", text) if w]


def _normalise_call(call: dict[str, Any], number: int, i: int) -> dict[str, Any]:
    function = dict(call["function"])
    arguments = function.get("arguments", "")
    function["arguments"] = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call.get("id") or f"call_{number}_{i}", "type": call.get("type", "function"), "function": function}


def _with_ids(calls: list[dict[str, Any]], ids: bool) -> list[dict[str, Any]]:
    return calls if ids else [{key: value for key, value in call.items() if key != "id"} for call in calls]


def _tool_call_start(index: int, call: dict[str, Any]) -> dict[str, Any]:
    start = {"index": index, "id": call.get("id"), "type": call["type"]}
    start["function"] = {"name": call["function"]["name"], "arguments": ""}
    return {key: value for key, value in start.items() if value is not None}


def _split_arguments(arguments: str) -> list[str]:
    """At least two pieces (the real API streams arguments a few tokens at a time)."""
    if len(arguments) < 2:
        return [arguments, ""]
    parts = min(4, len(arguments))
    size = -(-len(arguments) // parts)
    return [arguments[i : i + size] for i in range(0, len(arguments), size)]


async def start_fake_upstream(aiohttp_server: Any) -> tuple[FakeUpstream, TestServer]:
    """Serve a new :class:`FakeUpstream` with pytest-aiohttp's ``aiohttp_server``
    fixture. The OpenAI base URL is ``server.make_url("/v1")``."""
    fake = FakeUpstream()
    server: TestServer = await aiohttp_server(fake.app)
    return fake, server

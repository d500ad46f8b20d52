"""A fake Gemini upstream: a real aiohttp application speaking Gemini's API on loopback.

It answers as generativelanguage.googleapis.com does and records every request::

    fake, server = await start_fake_gemini(aiohttp_server)
    fake.reply(text="Hello", pieces=["Hel", "lo"])     # script the next generate request
    ...
    assert fake.generate_requests()[0].json()["contents"][0]["role"] == "user"

Routes under ``/v1beta/models/{model}``: ``:generateContent`` and ``:streamGenerateContent``
(``?alt=sse``: events ``data: {...}\\r\\n\\r\\n``; without it Gemini streams a JSON array, which the
fake refuses as ctxproxy never asks for it) and ``:countTokens``. A request without
``x-goog-api-key`` is refused 403 ``PERMISSION_DENIED``, one with a ``key`` in its query is
recorded (the tests assert it never arrives). A body is checked like the real API does
(``gemini_checks``; 400 ``INVALID_ARGUMENT``); a prompt over :attr:`FakeGemini.window` tokens is
refused with Gemini's wording, as JSON or (``refuse_in_stream``) as a stream's first event. The
echo model answers ``"echo: " + the last user text``; a user text with ``CALL_TOOL:<name>`` (and
that tool declared) gets a call of it. Usage: ``promptTokenCount``, the fake's own count (cl100k
tokens of the texts, 3 per content, and the tools' JSON), with ``cachedContentTokenCount`` when
scripted.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer

from ctxproxy.tokens import TokenCounter
from tests.fakes.gemini_checks import check_request
from tests.fakes.serving import Ending, Recorded, ScriptedFake

__all__ = ["FakeGemini", "gemini_error", "overflow_message", "start_fake_gemini"]

BASE = "/v1beta"
_CALL_TOOL = re.compile(r"CALL_TOOL:([A-Za-z0-9_.-]+)")


def gemini_error(code: int, message: str, status: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}


def overflow_message(prompt: int, window: int) -> str:
    return f"The input token count ({prompt}) exceeds the maximum number of tokens allowed ({window})."


@dataclass
class _Ctx:
    request: web.Request
    recorded: Recorded
    number: int

    def payload(self) -> dict[str, Any]:
        return self.recorded.payload()

    @property
    def stream(self) -> bool:
        return self.request.match_info["method"] == "streamGenerateContent"


@dataclass(frozen=True)
class Script:
    text: str | None = None
    calls: list[dict[str, Any]] | None = None  # {"name", "args"?, "thoughtSignature"?}
    pieces: list[str] | None = None
    usage: dict[str, Any] | None = None
    thought: str | None = None


class FakeGemini(ScriptedFake):
    default_path = "generate"  # every generate request, whatever its model

    def __init__(self) -> None:
        super().__init__()
        self.window: int | None = None
        self.refuse_in_stream = False
        self._counter = TokenCounter()
        self.app = web.Application(client_max_size=1 << 40)
        self.app.router.add_post(BASE + "/models/{model}:{method}", self._route(self._models))
        self.app.router.add_route("*", "/{tail:.*}", self._route(self._not_found))

    def generate_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith(("generateContent", "GenerateContent"))]

    def prompt_tokens(self, payload: dict[str, Any]) -> int:
        strings: list[str] = []
        _strings(payload.get("contents"), strings)
        _strings(payload.get("systemInstruction", payload.get("system_instruction")), strings)
        contents = payload.get("contents")
        framing = 3 * len(contents) if isinstance(contents, list) else 0
        tools = payload.get("tools")
        declared = self._counter.count_tools(tools) if isinstance(tools, list) else 0
        return sum(self._counter.count_text(text) for text in strings) + framing + declared

    # ------------------------------------------------------------------ scripting

    def reply(
        self,
        text: str | None = None,
        *,
        calls: list[dict[str, Any]] | None = None,
        pieces: list[str] | None = None,
        usage: dict[str, Any] | None = None,
        thought: str | None = None,
        ending: Ending | None = None,
        hold: tuple[int, asyncio.Event] | None = None,
        delay: float = 0.0,
    ) -> None:
        script = Script(text, calls, pieces, usage, thought)

        async def run(ctx: _Ctx) -> web.StreamResponse:
            return await self._answer(ctx, script, ending=ending, hold=hold, delay=delay)

        self._queue_behaviour(run)

    def reply_refusal_in_stream(
        self, message: str, *, after_pieces: list[str] | None = None, gate: asyncio.Event | None = None
    ) -> None:
        """A 200 stream of ``after_pieces`` (none: nothing) and then an error event saying
        ``message`` (``INVALID_ARGUMENT``), which waits for ``gate`` when given."""

        async def run(ctx: _Ctx) -> web.StreamResponse:
            model = ctx.request.match_info["model"]
            events: list[Any] = [
                {
                    "candidates": [{"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}],
                    "modelVersion": model,
                }
                for piece in after_pieces or []
            ]
            events.append(gemini_error(400, message, "INVALID_ARGUMENT"))
            hold = None if gate is None else (len(events) - 1, gate)
            return await self._sse(ctx, events, delay=0.0, headers=None, hold=hold)

        self._queue_behaviour(run)

    def reply_error(self, status: int, body: dict[str, Any]) -> None:
        async def run(ctx: _Ctx) -> web.StreamResponse:
            return self._json(ctx, body, status, None)

        self._queue_behaviour(run)

    # ------------------------------------------------------------------ serving

    def _take_behaviour(self, path: str) -> Any:
        return super()._take_behaviour("generate" if path.endswith("enerateContent") else path)

    def _context(self, request: web.Request, recorded: Recorded, number: int, default: Any, started: float) -> _Ctx:
        return _Ctx(request, recorded, number)

    async def _models(self, ctx: _Ctx) -> web.StreamResponse:
        if not ctx.request.headers.get("x-goog-api-key"):
            error = gemini_error(403, "Method doesn't allow unregistered callers.", "PERMISSION_DENIED")
            return self._json(ctx, error, 403, None)
        try:
            orjson.loads(ctx.recorded.body)
        except orjson.JSONDecodeError:
            return self._json(ctx, gemini_error(400, "Invalid JSON payload received.", "INVALID_ARGUMENT"), 400, None)
        payload = ctx.payload()
        method = ctx.request.match_info["method"]
        if method == "countTokens":
            return self._json(ctx, {"totalTokens": self.prompt_tokens(payload)}, 200, None)
        if method not in ("generateContent", "streamGenerateContent"):
            return await self._not_found(ctx)
        if ctx.stream and ctx.request.query.get("alt") != "sse":
            return self._json(ctx, gemini_error(400, "The fake streams SSE only.", "INVALID_ARGUMENT"), 400, None)
        problem = check_request(payload)
        if problem is not None:
            return self._json(ctx, gemini_error(400, problem, "INVALID_ARGUMENT"), 400, None)
        prompt = self.prompt_tokens(payload)
        if self.window is not None and prompt > self.window:
            error = gemini_error(400, overflow_message(prompt, self.window), "INVALID_ARGUMENT")
            if ctx.stream and self.refuse_in_stream:
                return await self._sse(ctx, [error], delay=0.0, headers=None)
            return self._json(ctx, error, 400, None)
        return await self._answer(ctx, Script())

    async def _not_found(self, ctx: _Ctx) -> web.StreamResponse:
        error = gemini_error(404, f"Not found: {ctx.request.method} {ctx.request.path}", "NOT_FOUND")
        return self._json(ctx, error, 404, None)

    # ------------------------------------------------------------------ answering

    def _parts(self, ctx: _Ctx, script: Script) -> list[dict[str, Any]]:
        payload = ctx.payload()
        parts: list[dict[str, Any]] = [{"text": script.thought, "thought": True}] if script.thought else []
        calls = script.calls
        text = script.text
        if calls is None and text is None:
            tool = _requested_tool(payload)
            calls = [{"name": tool}] if tool else None
            text = None if tool else "echo: " + _last_user_text(payload)
        if text:
            parts.append({"text": text})
        for call in calls or []:
            part: dict[str, Any] = {"functionCall": {"name": call["name"], "args": call.get("args", {"q": "x"})}}
            if call.get("thoughtSignature"):
                part["thoughtSignature"] = call["thoughtSignature"]
            parts.append(part)
        return parts

    def _usage(self, ctx: _Ctx, script: Script) -> dict[str, Any]:
        prompt = self.prompt_tokens(ctx.payload())
        return script.usage or {"promptTokenCount": prompt, "candidatesTokenCount": 5, "totalTokenCount": prompt + 5}

    async def _answer(
        self,
        ctx: _Ctx,
        script: Script,
        *,
        ending: Ending | None = None,
        hold: tuple[int, asyncio.Event] | None = None,
        delay: float = 0.0,
    ) -> web.StreamResponse:
        parts = self._parts(ctx, script)
        usage = self._usage(ctx, script)
        model = ctx.request.match_info["model"]
        if not ctx.stream:
            candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            body = {
                "candidates": [candidate],
                "usageMetadata": usage,
                "modelVersion": model,
                "responseId": f"r{ctx.number}",
            }
            return self._json(ctx, body, 200, None)
        chunks: list[list[dict[str, Any]]] = []
        for part in parts:
            if "text" in part and script.pieces and not part.get("thought"):
                chunks += [[{"text": piece}] for piece in script.pieces]
            else:
                chunks.append([part])
        events = []
        for i, chunk in enumerate(chunks):
            candidate: dict[str, Any] = {"content": {"role": "model", "parts": chunk}, "index": 0}
            event: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": f"r{ctx.number}"}
            if i == len(chunks) - 1:
                candidate["finishReason"] = "STOP"
                event["usageMetadata"] = usage
            events.append(event)
        return await self._sse(ctx, events, delay=delay, headers=None, ending=ending, hold=hold)

    def _headers(self, ctx: _Ctx) -> dict[str, str]:
        return {"x-gemini-service-tier": "standard", "Server-Timing": "gfet4t7; dur=10"}

    def _event_bytes(self, event: Any) -> bytes:
        return b"data: " + orjson.dumps(event) + b"\r\n\r\n"


def _strings(value: Any, out: list[str]) -> None:
    """Every text of ``value``: strings but ids, roles, signatures and mime types."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for inner in value:
            _strings(inner, out)
    elif isinstance(value, dict):
        for key, inner in value.items():
            if key not in ("id", "role", "thoughtSignature", "thought_signature", "mimeType", "mime_type", "data"):
                _strings(inner, out)


def _last_user_text(payload: dict[str, Any]) -> str:
    for content in reversed(payload.get("contents") or []):
        if isinstance(content, dict) and content.get("role", "user") == "user":
            texts = [
                p["text"] for p in content.get("parts") or [] if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
            if texts:
                return "".join(texts)
    return ""


def _requested_tool(payload: dict[str, Any]) -> str | None:
    """The tool the last content asks for (``CALL_TOOL:<name>`` in a user text), when declared."""
    declared = {
        d.get("name")
        for tool in payload.get("tools") or []
        for d in tool.get("functionDeclarations", tool.get("function_declarations")) or []
    }
    contents = payload.get("contents") or [{}]
    last = contents[-1] if isinstance(contents[-1], dict) else {}
    texts = [p["text"] for p in last.get("parts") or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    match = _CALL_TOOL.search("".join(texts)) if last.get("role", "user") == "user" else None
    return match.group(1) if match and match.group(1) in declared else None


async def start_fake_gemini(aiohttp_server: Any) -> tuple[FakeGemini, TestServer]:
    fake = FakeGemini()
    server: TestServer = await aiohttp_server(fake.app)
    return fake, server

"""The proxy-tool loop: forward a chat request with our tools, answer our calls, ask again.

Round 1 goes upstream like any chat request, with ``with_tools(body, tools)``. While the model's
answer calls only our tools, ctxproxy answers them (``execute``), appends the assistant message and
one ``tool`` message per call, and posts again — at most ``max_rounds`` tool rounds; the call after
the last of them carries ``tool_choice: "none"`` so the model has to answer in text. The client
gets only that final answer: usage summed over every round, our calls never.

Streaming: the client's response starts when round 1's first events are known not to be a
context overflow. Every round is relayed through a ``RoundFilter`` into the same response, so
content is streamed as it is generated, in every round; a non-final round's finish and usage
chunks are dropped; the last round's finish chunk is followed by the summed usage (when the
client asked for it) and ``[DONE]``. Text a round streamed before calling our tools stays in the
client's stream; the JSON answer carries only the last round's message.

Mixed turns: when one answer calls the client's tools and ours, ours are *not* answered. They are
stripped and the client gets its own calls (renumbered from 0), exactly as if the model had made
only those. The client's next request — its assistant message with its calls, then its tool
results — is a valid conversation, and the model can call our tools again then if it still needs
to. Answering ours first would need a second upstream call whose answer might no longer contain
the client's calls, and the client would have waited for nothing.

Errors: an overflow in round 1 (HTTP error or the first SSE events) returns ``Overflow()`` with
nothing sent, so the caller can compact and retry. An upstream error in a later round is relayed
as it is (JSON) or, once the stream has started, as an OpenAI-shaped SSE error event and
``[DONE]``. A failing executor does not end the request: the model is told the call failed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import structlog
from aiohttp import web

from proxy.config.models import TenantConfig
from proxy.errors import ProxyError, UpstreamError
from proxy.tools.calls import (
    ProxyCall,
    add_usage,
    assistant_turn,
    final_answer,
    first_choice,
    round_messages,
    split_calls,
    wants_answers,
)
from proxy.tools.definitions import ProxyTools, with_tools
from proxy.tools.stream import RoundFilter, RoundResult, closing_events, sse_event
from proxy.upstream.client import TRANSPORT_ERRORS, timeout_for, translate, upstream_errors
from proxy.upstream.headers import client_response_headers, upstream_request_headers, upstream_url
from proxy.upstream.overflow import Overflow, is_context_overflow, sse_error_is_overflow
from proxy.upstream.relay import finish, first_events, relay_body, send
from proxy.upstream.sse import DONE, EventFramer, error_event, event_payloads

log = structlog.get_logger(__name__)

ToolExecutor = Callable[[str, Mapping[str, Any] | None, str], Awaitable[str]]
"""(internal tool name, arguments when they are a JSON object else None, raw arguments) → the
``tool`` message content. Bad arguments are answered with an explanation, not an exception."""

EXECUTOR_FAILED = "ctxproxy could not answer this call because of an internal error. Answer without it."


@dataclass(frozen=True)
class _Loop:
    """What every round of one request shares."""

    request: web.Request
    http: aiohttp.ClientSession
    tenant: TenantConfig
    tools: ProxyTools
    execute: ToolExecutor
    max_rounds: int

    async def post(self, payload: Mapping[str, Any]) -> aiohttp.ClientResponse:
        """Post one round exactly as the chat handler posts a request (headers, URL, timeouts)."""
        headers = upstream_request_headers(self.request.headers, self.tenant, decode_body=True)
        headers.setdefault("Content-Type", "application/json")
        url = upstream_url(self.tenant, "/chat/completions", self.request.rel_url.raw_query_string)
        with upstream_errors(self.tenant.upstream):
            return await self.http.post(
                url, data=orjson.dumps(payload), headers=headers, timeout=timeout_for(self.tenant.upstream)
            )

    async def answer(self, calls: Sequence[ProxyCall]) -> list[str]:
        answers = []
        for call in calls:
            try:
                answers.append(await self.execute(call.name, call.parsed_arguments(), call.arguments))
            except Exception:
                log.exception("tools.executor_failed", tool=call.name)
                answers.append(EXECUTOR_FAILED)
        return answers

    def next_payload(self, payload: Mapping[str, Any], messages: list[Any], rounds: int) -> dict[str, Any]:
        """The request after ``rounds`` tool rounds; the last allowed one forbids further calls."""
        out = {**payload, "messages": messages}
        if rounds >= self.max_rounds:
            out["tool_choice"] = "none"
        return out


async def forward_with_tools(
    request: web.Request,
    http: aiohttp.ClientSession,
    tenant: TenantConfig,
    body: dict[str, Any],
    stream: bool,
    ctx_headers: Mapping[str, str],
    tools: ProxyTools,
    execute: ToolExecutor,
    max_rounds: int,
) -> web.StreamResponse | Overflow:
    """Forward ``body`` (already compacted) with our tools and answer our calls; see the module doc."""
    loop = _Loop(request, http, tenant, tools, execute, max_rounds)
    payload = with_tools(body, tools)
    if stream:
        return await _stream(loop, payload, ctx_headers, _include_usage(body))
    return await _json(loop, payload, ctx_headers)


def _include_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, Mapping) and options.get("include_usage") is True


def _log_done(rounds: int, stream: bool, outcome: str) -> None:
    log.info("tools.loop_done", tool_rounds=rounds, stream=stream, outcome=outcome)


# ---------------------------------------------------------------------------------------- JSON


async def _json(loop: _Loop, payload: dict[str, Any], ctx_headers: Mapping[str, str]) -> web.StreamResponse | Overflow:
    messages = list(payload.get("messages") or [])
    usage: Mapping[str, Any] | None = None
    rounds = 0
    while True:
        up = await loop.post(payload)
        try:
            with upstream_errors(loop.tenant.upstream):
                raw = await up.read()
        finally:
            up.close()
        if up.status != 200:
            if rounds == 0 and up.status >= 400 and is_context_overflow(up.status, raw):
                return Overflow()
            _log_done(rounds, False, f"upstream_{up.status}")
            return await relay_body(up, raw, ctx_headers)
        answer = _json_object(raw)
        if answer is None:  # not a completion: nothing of ours can be in it
            _log_done(rounds, False, "not_json")
            return await relay_body(up, raw, ctx_headers)
        usage = add_usage(usage, _mapping(answer.get("usage")))
        choice = first_choice(answer)
        message = _mapping(choice.get("message")) or {}
        proxy, client = split_calls(message, loop.tools)
        if rounds < loop.max_rounds and wants_answers(proxy, bool(client), choice.get("finish_reason")):
            answers = await loop.answer(proxy)
            turn = assistant_turn(message.get("content"), proxy, message.get("reasoning_content"))
            messages += round_messages(turn, proxy, answers)
            rounds += 1
            payload = loop.next_payload(payload, messages, rounds)
            continue
        _log_done(rounds, False, "answered")
        if rounds == 0 and not proxy:
            return await relay_body(up, raw, ctx_headers)  # untouched: the upstream's own bytes
        return await relay_body(up, orjson.dumps(final_answer(answer, loop.tools, usage)), ctx_headers)


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


# ------------------------------------------------------------------------------------ streaming


async def _stream(
    loop: _Loop, payload: dict[str, Any], ctx_headers: Mapping[str, str], include_usage: bool
) -> web.StreamResponse | Overflow:
    up = await loop.post(payload)
    try:
        if up.status != 200 or up.content_type != "text/event-stream":
            with upstream_errors(loop.tenant.upstream):
                raw = await up.read()
            if up.status >= 400 and is_context_overflow(up.status, raw):
                return Overflow()
            answer = _json_object(raw) if up.status == 200 else None
            if answer is not None:  # the upstream ignored "stream": still no call of ours may pass
                raw = orjson.dumps(final_answer(answer, loop.tools, _mapping(answer.get("usage"))))
            _log_done(0, True, f"upstream_{up.status}")
            return await relay_body(up, raw, ctx_headers)
        framer = EventFramer()
        with upstream_errors(loop.tenant.upstream):
            first = await first_events(up, framer)
        if any(sse_error_is_overflow(data) for data in event_payloads(first)):
            return Overflow()
        headers = client_response_headers(up.headers, body_decoded=True)
        headers.update(ctx_headers)
        response = web.StreamResponse(status=200, headers=headers)
        await response.prepare(loop.request)
        relay = _StreamRelay(loop, response)
        result = await relay.pump(up, RoundFilter(loop.tools), first, framer)
    finally:
        up.close()
    await relay.continue_rounds(result, payload, include_usage)
    return response


class _StreamRelay:
    """One client stream fed by successive upstream rounds."""

    def __init__(self, loop: _Loop, response: web.StreamResponse) -> None:
        self._loop = loop
        self._response = response

    async def continue_rounds(self, result: RoundResult | None, payload: dict[str, Any], include_usage: bool) -> None:
        messages = list(payload.get("messages") or [])
        usage: Mapping[str, Any] | None = None
        rounds = 0
        while result is not None:
            usage = add_usage(usage, result.usage)
            if not self._answers_wanted(result, rounds):
                await send(self._response, closing_events(result, usage, include_usage, rounds) + DONE)
                await finish(self._response)
                _log_done(rounds, True, "answered")
                return
            answers = await self._loop.answer(result.proxy_calls)
            turn = assistant_turn(result.content, result.proxy_calls, result.reasoning)
            messages += round_messages(turn, result.proxy_calls, answers)
            rounds += 1
            payload = self._loop.next_payload(payload, messages, rounds)
            result = await self._next_round(payload, result.completion_id)
        _log_done(rounds, True, "interrupted")  # the client left, or the upstream failed (reported)

    def _answers_wanted(self, result: RoundResult, rounds: int) -> bool:
        """A round that ended cleanly with calls of ours only, while rounds remain."""
        if result.error or result.finish_reason is None or rounds >= self._loop.max_rounds:
            return False
        return wants_answers(result.proxy_calls, result.client_calls, result.finish_reason)

    async def _next_round(self, payload: Mapping[str, Any], completion_id: str | None) -> RoundResult | None:
        try:
            up = await self._loop.post(payload)
        except ProxyError as exc:
            await self._fail(exc)
            return None
        try:
            if up.status != 200 or up.content_type != "text/event-stream":
                try:
                    raw = await up.read()
                except TRANSPORT_ERRORS as exc:
                    await self._fail(translate(exc, self._loop.tenant.upstream))
                    return None
                await send(self._response, _error_from_body(up.status, raw) + DONE)
                await finish(self._response)
                return None
            return await self.pump(up, RoundFilter(self._loop.tools, completion_id), b"", EventFramer())
        finally:
            up.close()

    async def pump(
        self, up: aiohttp.ClientResponse, flt: RoundFilter, first: bytes, framer: EventFramer
    ) -> RoundResult | None:
        """Relay one round until it ends; None when the client left or the upstream failed (reported)."""
        ready = first
        while True:
            for data in event_payloads(ready):
                out = flt.feed(data)
                if out and not await send(self._response, out):
                    log.info("client.disconnected_mid_stream")
                    return None
            try:
                chunk = await up.content.readany()
            except TRANSPORT_ERRORS as exc:
                log.warning("upstream.stream_failed", error=type(exc).__name__, detail=str(exc))
                await self._fail(translate(exc, self._loop.tenant.upstream))
                return None
            if not chunk:
                for data in event_payloads(framer.rest()):
                    if not await send(self._response, flt.feed(data)):
                        return None
                return flt.result()
            ready = framer.feed(chunk)

    async def _fail(self, failure: ProxyError) -> None:
        await send(self._response, error_event(failure.message, failure.type, failure.code or "upstream_error") + DONE)
        await finish(self._response)


def _error_from_body(status: int, raw: bytes) -> bytes:
    """An upstream error answer of a later round, as an SSE error event (the status line has gone)."""
    parsed = _json_object(raw)
    if parsed is not None and isinstance(parsed.get("error"), Mapping):
        return sse_event(orjson.dumps({"error": parsed["error"]}))
    failure = UpstreamError(f"The upstream answered HTTP {status} to a proxy tool round.")
    return error_event(failure.message, failure.type, failure.code or "upstream_error")

"""The proxy-tool loop: forward a chat request with our tools, answer our calls, ask again.

Round 1 goes upstream like any chat request, with ``with_tools(body, tools)``. While the model's
answer calls only our tools, ctxproxy answers them (``execute``), appends the assistant message and
one ``tool`` message per call, and posts again — at most ``[tools] max_rounds`` tool rounds; the
call after the last of them carries ``tool_choice: "none"`` so the model has to answer in text. The
client gets only that final answer: usage summed over every round, our calls never.

Window: the loop starts from the prompt as the chat handler forwarded it (its token count and the
model's window, ``Budget``) and counts everything it appends. Each round's answers share the room
left, so the next round fits (``budget``); a call with no room left is answered ``NO_ROOM`` and
the next round is the last, as it is once the room left could not hold another answer. Each answer
is also at most the tenant's ``result_max_tokens``, and at most ``MAX_CALLS_PER_ROUND`` calls of a
round are answered (the others are told to call again).

Text: what every round says reaches the client — streamed as it is generated, and in the JSON
answer's message — with a blank line before a round's text unless the text before it already
ends in whitespace (``joined_text``).

Streaming: the client's response starts when round 1's first events are known not to be a
context overflow. Every round is relayed through a ``RoundFilter`` into the same response, so
content is streamed as it is generated, in every round; a non-final round's finish and usage
chunks are dropped; the last round's finish chunk is followed by the summed usage (when the
client asked for it) and ``[DONE]``.

Mixed turns: when one answer calls the client's tools and ours, ours are *not* answered. They are
stripped and the client gets its own calls (renumbered from 0), exactly as if the model had made
only those. The client's next request — its assistant message with its calls, then its tool
results — is a valid conversation, and the model can call our tools again then if it still needs
to. Answering ours first would need a second upstream call whose answer might no longer contain
the client's calls, and the client would have waited for nothing.

Errors: an overflow in round 1 (HTTP error or the first SSE events) returns ``Overflow()`` with
nothing sent, so the caller can compact and retry. An overflow in a later round (our count of the
prompt was lower than the upstream's) is retried once, with every answer the loop gave replaced
by ``NO_ROOM`` and ``tool_choice: "none"``: the same conversation shape, about as long as round 1's
prompt. If that overflows too, the client gets a ``context_length_exceeded`` error (a 400, or an
SSE error event and ``[DONE]`` once the stream has started). Any other upstream error in a later
round is relayed as it is (JSON) or as an SSE error event and ``[DONE]``. A failing executor does
not end the request: the model is told the call failed.
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
from proxy.errors import ContextLengthExceeded, ProxyError, UpstreamError
from proxy.tools.budget import MAX_CALLS_PER_ROUND, MIN_ANSWER_TOKENS, NO_ROOM, TOO_MANY, Budget, Counting
from proxy.tools.calls import (
    ProxyCall,
    add_usage,
    assistant_turn,
    final_answer,
    first_choice,
    joined_text,
    replace_answers,
    round_messages,
    separator_after,
    split_calls,
    tool_message,
    wants_answers,
)
from proxy.tools.definitions import ProxyTools, client_tool_names, with_tools
from proxy.tools.stream import RoundFilter, RoundResult, closing_events, sse_event
from proxy.upstream.client import TRANSPORT_ERRORS, timeout_for, translate, upstream_errors
from proxy.upstream.headers import client_response_headers, upstream_request_headers, upstream_url
from proxy.upstream.overflow import Overflow, is_context_overflow, sse_error_is_overflow
from proxy.upstream.relay import finish, first_events, relay_body, send
from proxy.upstream.sse import DONE, EventFramer, error_event, event_payloads

log = structlog.get_logger(__name__)

ToolExecutor = Callable[[str, Mapping[str, Any] | None, str, int], Awaitable[str]]
"""(internal tool name, arguments when they are a JSON object else None, raw arguments, the most
tokens the answer may take) → the ``tool`` message content. Bad arguments are answered with an
explanation, not an exception."""

EXECUTOR_FAILED = "ctxproxy could not answer this call because of an internal error. Answer without it."
LATER_OVERFLOW = (
    "The conversation does not fit the model's context window once ctxproxy's tool answers are added: the "
    "upstream refused a later round of ctxproxy's tool loop, and again after ctxproxy withdrew its answers. "
    "Shorten the newest messages or use a model with a larger window."
)


@dataclass(frozen=True)
class _Loop:
    """What every round of one request shares."""

    request: web.Request
    http: aiohttp.ClientSession
    tenant: TenantConfig
    tools: ProxyTools
    client_names: frozenset[str]
    execute: ToolExecutor
    counting: Counting

    async def post(self, payload: Mapping[str, Any]) -> aiohttp.ClientResponse:
        """Post one round exactly as the chat handler posts a request (headers, URL, timeouts)."""
        headers = upstream_request_headers(self.request.headers, self.tenant, decode_body=True)
        headers.setdefault("Content-Type", "application/json")
        url = upstream_url(self.tenant, "/chat/completions", self.request.rel_url.raw_query_string)
        with upstream_errors(self.tenant.upstream):
            return await self.http.post(
                url, data=orjson.dumps(payload), headers=headers, timeout=timeout_for(self.tenant.upstream)
            )

    async def answer(
        self, turn: Mapping[str, Any], calls: Sequence[ProxyCall], budget: Budget
    ) -> tuple[list[str], Budget, bool]:
        """The answers to ``calls`` (made in ``turn``), the budget once the round is added, and
        whether the next round must be the last (no room for more)."""
        count = self.counting.count_message
        budget = budget.spend(count(turn))
        answered = min(len(calls), MAX_CALLS_PER_ROUND)
        answers: list[str] = []
        starved = False
        for position, call in enumerate(calls):
            if position >= answered:
                text = TOO_MANY
            else:
                share = budget.share(count(tool_message(call.id, "")), answered - position)
                limit = min(share, self.tenant.tools.result_max_tokens)
                starved = starved or limit < MIN_ANSWER_TOKENS
                text = NO_ROOM if limit < MIN_ANSWER_TOKENS else self.counting.clip(await self._one(call, limit), limit)
            answers.append(text)
            budget = budget.spend(count(tool_message(call.id, text)))
        return answers, budget, starved or budget.exhausted

    async def _one(self, call: ProxyCall, limit: int) -> str:
        try:
            return await self.execute(call.name, call.parsed_arguments(), call.arguments, limit)
        except Exception:
            log.exception("tools.executor_failed", tool=call.name)
            return EXECUTOR_FAILED


class _Rounds:
    """The conversation one request's loop builds: its next payload, rounds, budget and shown text."""

    def __init__(self, loop: _Loop, payload: dict[str, Any], budget: Budget) -> None:
        self._loop = loop
        self.payload = payload
        self._messages = list(payload.get("messages") or [])
        self._start = len(self._messages)  # the loop's own messages begin here
        self.budget = budget
        self.rounds = 0
        self.closed = False  # the payload forbids further calls: whatever the model calls is not answered
        self._withdrawn = False
        self._texts: list[str] = []

    def wants(self, proxy: Sequence[ProxyCall], client_calls: bool, finish_reason: object) -> bool:
        return not self.closed and wants_answers(proxy, client_calls, finish_reason)

    def shown(self, text: object) -> None:
        """A round's text has reached the client (streamed) or will (JSON)."""
        if isinstance(text, str) and text:
            self._texts.append(text)

    @property
    def lead(self) -> str:
        """What the next round's text is preceded by, for the client."""
        return separator_after(self.earlier)

    @property
    def earlier(self) -> str:
        return joined_text(self._texts)

    async def answer(self, content: object, calls: Sequence[ProxyCall], reasoning: object) -> None:
        """Answer one round's calls and make the next payload."""
        turn = assistant_turn(content, calls, reasoning)
        answers, self.budget, starved = await self._loop.answer(turn, calls, self.budget)
        self._messages += round_messages(turn, calls, answers)
        self.rounds += 1
        self.closed = self.rounds >= self._loop.tenant.tools.max_rounds or starved
        self.payload = self._next(self._messages)

    def withdraw(self) -> bool:
        """After a later round overflowed: the same round with every answer the loop gave replaced by
        ``NO_ROOM``, and the last. False when that was already tried."""
        if self._withdrawn or self.rounds == 0:
            return False
        self._withdrawn = self.closed = True
        self.payload = self._next(replace_answers(self._messages, self._start, NO_ROOM))
        return True

    def _next(self, messages: list[Any]) -> dict[str, Any]:
        out = {**self.payload, "messages": messages}
        if self.closed:
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
    budget: Budget,
    counting: Counting,
) -> web.StreamResponse | Overflow:
    """Forward ``body`` (already compacted) with our tools and answer our calls; see the module doc.

    ``budget``: the model's window and the forwarded prompt's tokens (messages and every tool
    definition); ``counting`` measures what the loop adds, with the same counter."""
    loop = _Loop(request, http, tenant, tools, client_tool_names(body), execute, counting)
    rounds = _Rounds(loop, with_tools(body, tools), budget)
    if stream:
        return await _stream(loop, rounds, ctx_headers, _include_usage(body))
    return await _json(loop, rounds, ctx_headers)


def _include_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, Mapping) and options.get("include_usage") is True


def _log_done(rounds: int, stream: bool, outcome: str) -> None:
    log.info("tools.loop_done", tool_rounds=rounds, stream=stream, outcome=outcome)


# ---------------------------------------------------------------------------------------- JSON


async def _json(loop: _Loop, rounds: _Rounds, ctx_headers: Mapping[str, str]) -> web.StreamResponse | Overflow:
    usage: Mapping[str, Any] | None = None
    while True:
        up = await loop.post(rounds.payload)
        try:
            with upstream_errors(loop.tenant.upstream):
                raw = await up.read()
        finally:
            up.close()
        if up.status != 200:
            if up.status >= 400 and is_context_overflow(up.status, raw):
                if rounds.rounds == 0:
                    return Overflow()
                if rounds.withdraw():
                    log.warning("tools.round_overflow", tool_rounds=rounds.rounds, retry="answers_withdrawn")
                    continue
                _log_done(rounds.rounds, False, "overflow")
                raise ContextLengthExceeded(LATER_OVERFLOW)
            _log_done(rounds.rounds, False, f"upstream_{up.status}")
            return await relay_body(up, raw, ctx_headers)
        answer = _json_object(raw)
        if answer is None:  # not a completion: nothing of ours can be in it
            _log_done(rounds.rounds, False, "not_json")
            return await relay_body(up, raw, ctx_headers)
        usage = add_usage(usage, _mapping(answer.get("usage")))
        choice = first_choice(answer)
        message = _mapping(choice.get("message")) or {}
        proxy, client = split_calls(message, loop.tools)
        if rounds.wants(proxy, bool(client), choice.get("finish_reason")):
            rounds.shown(message.get("content"))
            await rounds.answer(message.get("content"), proxy, message.get("reasoning_content"))
            continue
        _log_done(rounds.rounds, False, "answered")
        if rounds.rounds == 0 and not proxy:
            return await relay_body(up, raw, ctx_headers)  # untouched: the upstream's own bytes
        final = final_answer(answer, loop.tools, usage, rounds.earlier)
        return await relay_body(up, orjson.dumps(final), ctx_headers)


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
    loop: _Loop, rounds: _Rounds, ctx_headers: Mapping[str, str], include_usage: bool
) -> web.StreamResponse | Overflow:
    up = await loop.post(rounds.payload)
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
        result = await relay.pump(up, relay.round_filter(None, ""), first, framer)
    finally:
        up.close()
    await relay.continue_rounds(result, rounds, include_usage)
    return response


class _StreamRelay:
    """One client stream fed by successive upstream rounds."""

    def __init__(self, loop: _Loop, response: web.StreamResponse) -> None:
        self._loop = loop
        self._response = response

    def round_filter(self, completion_id: str | None, lead: str) -> RoundFilter:
        return RoundFilter(self._loop.tools, completion_id, client_names=self._loop.client_names, lead=lead)

    async def continue_rounds(self, result: RoundResult | None, rounds: _Rounds, include_usage: bool) -> None:
        usage: Mapping[str, Any] | None = None
        completion_id = result.completion_id if result is not None else None
        while result is not None:
            usage = add_usage(usage, result.usage)
            rounds.shown(result.content)
            if not self._answers_wanted(result, rounds):
                await send(self._response, closing_events(result, usage, include_usage, rounds.rounds) + DONE)
                await finish(self._response)
                _log_done(rounds.rounds, True, "answered")
                return
            await rounds.answer(result.content, result.proxy_calls, result.reasoning)
            result = await self._round(rounds, completion_id)
        _log_done(rounds.rounds, True, "interrupted")  # the client left, or the upstream failed (reported)

    def _answers_wanted(self, result: RoundResult, rounds: _Rounds) -> bool:
        """A round that ended cleanly with calls of ours only, while rounds remain."""
        if result.error or result.finish_reason is None:
            return False
        return rounds.wants(result.proxy_calls, result.client_calls, result.finish_reason)

    async def _round(self, rounds: _Rounds, completion_id: str | None) -> RoundResult | None:
        """The next round, retried once with the answers withdrawn when it overflows."""
        outcome = await self._next_round(rounds.payload, completion_id, rounds.lead)
        if isinstance(outcome, Overflow) and rounds.withdraw():
            log.warning("tools.round_overflow", tool_rounds=rounds.rounds, retry="answers_withdrawn")
            outcome = await self._next_round(rounds.payload, completion_id, rounds.lead)
        if isinstance(outcome, Overflow):
            await self._fail(ContextLengthExceeded(LATER_OVERFLOW))
            return None
        return outcome

    async def _next_round(
        self, payload: Mapping[str, Any], completion_id: str | None, lead: str
    ) -> RoundResult | Overflow | None:
        """One later round relayed; ``Overflow()`` when the upstream refused it as too long (nothing
        of it was sent); None when it failed (reported) or the client left."""
        try:
            up = await self._loop.post(payload)
        except ProxyError as exc:
            await self._fail(exc)
            return None
        try:
            framer = EventFramer()
            try:
                if up.status != 200 or up.content_type != "text/event-stream":
                    raw = await up.read()
                else:
                    first = await first_events(up, framer)
            except TRANSPORT_ERRORS as exc:
                await self._fail(translate(exc, self._loop.tenant.upstream))
                return None
            if up.status != 200 or up.content_type != "text/event-stream":
                if up.status >= 400 and is_context_overflow(up.status, raw):
                    return Overflow()
                await send(self._response, _error_from_body(up.status, raw) + DONE)
                await finish(self._response)
                return None
            if any(sse_error_is_overflow(data) for data in event_payloads(first)):
                return Overflow()
            return await self.pump(up, self.round_filter(completion_id, lead), first, framer)
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
                rest = b"".join(flt.feed(data) for data in event_payloads(framer.rest()))
                if not await send(self._response, rest + flt.end()):
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

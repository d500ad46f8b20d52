"""The proxy-tool loop, once for every protocol that brings its shapes as a ``ToolDialect``.

Round 1 is the forwarded body with ctxproxy's tools offered. While an answer is complete and calls
ctxproxy's tools only, ctxproxy answers the calls (the dialect's ``Progress``: within the window,
at most ``max_rounds``, the last round told to answer in text), sends the round back and posts
again; the client gets one answer. An answer that calls a client tool too goes to the client, ours
taken out: its next request is a valid conversation, and the model can call ours again then.

JSON (``json_rounds``): every round is read whole; the client gets the dialect's ``final`` answer
(what earlier rounds showed, the last answer without our calls, the usage summed) with
``X-Ctx-Tool-Rounds``, or the upstream's own bytes when round 1 called nothing of ours. An answer
that is not one (an error status, another shape) is relayed as it came.

Streamed (``stream_rounds``): the client's stream starts once round 1 is known not to be refused
as too long (``round_io.first_round``); every round is relayed through the dialect's ``feed`` (our
calls taken out, the rest renumbered as one answer) and the stream ends with the dialect's
``closing`` — or, when a round fails, with the upstream's error event, the dialect's failure events
(``round_io``), or its ``truncated`` events for a round cut short. A round 1 answered with JSON
although a stream was asked for is relayed as JSON (our calls taken out).

Overflows: round 1's (an HTTP error, or an error event before content) is ``Overflow`` with nothing
sent, for the pipeline to compact and retry; a later round's is retried once with the answers
withdrawn (``Progress.withdraw``, ``round_io``). The loop writes one ``tools.loop_done`` line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

import orjson
import structlog
from aiohttp import web

from ctxproxy.tools.calls import ProxyCall, json_object
from ctxproxy.tools.progress import Progress, log_done
from ctxproxy.tools.report import with_tool_rounds
from ctxproxy.tools.round_io import RoundFeed, RoundsStream, StreamShape, first_round, is_event_stream, json_round
from ctxproxy.upstream.http1 import UpstreamResponse
from ctxproxy.upstream.overflow import Overflow, is_context_overflow
from ctxproxy.upstream.overflow_numbers import overflow_numbers
from ctxproxy.upstream.port import UpstreamPort
from ctxproxy.upstream.relay import relay_body

__all__ = [
    "ItemRounds",
    "LoopDialect",
    "RoundLoop",
    "RoundRead",
    "RoundsDialect",
    "StreamedRound",
    "ToolDialect",
    "json_rounds",
    "stream_rounds",
]

log = structlog.get_logger(__name__)
E = TypeVar("E", bound="StreamedRound")


@dataclass(frozen=True)
class RoundRead:
    """What one round's answer says, in every protocol's terms."""

    calls: Sequence[ProxyCall]  # ours, in the model's order
    client_calls: bool  # it calls a client tool too
    complete: bool  # the model stopped to have its calls answered (not cut, not refused)
    content: Any  # the answer as the dialect sends it back in the next round
    usage: Mapping[str, Any] | None


class StreamedRound(Protocol):
    """A streamed round once it has ended (the dialect's ``RoundFeed`` result)."""

    @property
    def read(self) -> RoundRead: ...

    @property
    def done(self) -> bool: ...  # its stream is complete

    @property
    def error(self) -> bool: ...  # it relayed an error event of the upstream's


class ToolDialect(Protocol[E]):
    """One protocol's shapes for the loop, for one request (it holds that request's rounds)."""

    @property
    def rounds(self) -> Progress: ...

    @property
    def request(self) -> web.Request: ...

    @property
    def port(self) -> UpstreamPort: ...

    @property
    def stream_shape(self) -> StreamShape: ...

    @property
    def log_fields(self) -> dict[str, Any]: ...

    def post(self, payload: Mapping[str, Any]) -> AbstractAsyncContextManager[UpstreamResponse]: ...

    def read(self, answer: Mapping[str, Any]) -> RoundRead | None:
        """A JSON answer's round; None when it is no answer of the model's (nothing of ours in it)."""
        ...

    def add_usage(self, usage: Mapping[str, Any] | None) -> None: ...

    async def answer_round(self, read: RoundRead) -> None:
        """Answer ``read``'s calls and make the next payload."""
        ...

    def final(self, answer: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON answer the client gets after ``answer``, the last round's."""
        ...

    def feed(self, previous: E | None) -> RoundFeed[E]:
        """The filter of the next streamed round (``previous``: the round before, None for round 1)."""
        ...

    def closing(self, last: E) -> bytes:
        """The events ending the client's stream after ``last``, complete or ended by the
        upstream's own error event."""
        ...

    def truncated(self) -> bytes:
        """The events ending the client's stream after a round cut short."""
        ...


class RoundLoop(Protocol):
    """What every round of one request shares, as a dialect passes it on (chat's ``rounds.Loop``,
    the other protocols' ``ctxproxy.wire.item_loop.ItemLoop``)."""

    @property
    def request(self) -> web.Request: ...

    @property
    def port(self) -> UpstreamPort: ...

    def post(self, payload: Mapping[str, Any]) -> AbstractAsyncContextManager[UpstreamResponse]: ...


class ItemRounds(Protocol):
    """Rounds that answer a round by sending back its ``content`` with one answer per call (its
    protocol's ``…Rounds``, a ``Progress``)."""

    def add_usage(self, usage: Mapping[str, Any] | None) -> None: ...

    async def answer(self, content: Any, calls: Sequence[ProxyCall]) -> None: ...


class LoopDialect:
    """The members of a ``ToolDialect`` that pass on to its ``loop`` (set by the dialect, a
    dataclass)."""

    loop: RoundLoop

    @property
    def request(self) -> web.Request:
        return self.loop.request

    @property
    def port(self) -> UpstreamPort:
        return self.loop.port

    def post(self, payload: Mapping[str, Any]) -> AbstractAsyncContextManager[UpstreamResponse]:
        return self.loop.post(payload)


class RoundsDialect(LoopDialect):
    """``LoopDialect`` and the members that pass on to its ``rounds`` (set by the dialect): a
    dialect brings its protocol's reading and shapes, and its log line."""

    rounds: ItemRounds

    def add_usage(self, usage: Mapping[str, Any] | None) -> None:
        self.rounds.add_usage(usage)

    async def answer_round(self, read: RoundRead) -> None:
        await self.rounds.answer(read.content, read.calls)


def _wants(dialect: ToolDialect[Any], read: RoundRead) -> bool:
    return not dialect.rounds.closed and bool(read.calls) and not read.client_calls and read.complete


async def json_rounds(dialect: ToolDialect[Any], ctx_headers: Mapping[str, str]) -> web.StreamResponse | Overflow:
    rounds = dialect.rounds
    while True:
        answered = await json_round(dialect.post, dialect.port, rounds)
        if isinstance(answered, Overflow):
            return answered
        up, raw = answered
        if rounds.rounds == 0:
            dialect.log_fields["upstream_status"] = up.status
        answer = json_object(raw) if up.status == 200 else None
        read = dialect.read(answer) if answer is not None else None
        if answer is None or read is None:  # an error, or not an answer: nothing of ours in it
            log_done(rounds.rounds, False, f"upstream_{up.status}" if up.status != 200 else "not_an_answer")
            return await relay_body(up, raw, with_tool_rounds(ctx_headers, rounds.rounds))
        dialect.add_usage(read.usage)
        if _wants(dialect, read):
            await dialect.answer_round(read)
            continue
        log_done(rounds.rounds, False, "answered")
        if rounds.rounds == 0 and not read.calls:
            return await relay_body(up, raw, ctx_headers)  # untouched: the upstream's own bytes
        final = orjson.dumps(dialect.final(answer))
        return await relay_body(up, final, with_tool_rounds(ctx_headers, rounds.rounds))


async def stream_rounds(dialect: ToolDialect[E], ctx_headers: Mapping[str, str]) -> web.StreamResponse | Overflow:
    """Round 1 and every later one, streamed; ``Overflow`` when round 1 was refused as too long."""
    async with dialect.post(dialect.rounds.payload) as up:
        dialect.log_fields["upstream_status"] = up.status
        if not is_event_stream(up):
            return await _not_streamed(dialect, up, ctx_headers)
        feed = dialect.feed(None)
        opened = await first_round(dialect.request, up, dialect.port, dialect.stream_shape, ctx_headers, feed)
        if isinstance(opened, Overflow):
            return opened
        stream, end = opened
    await _continue(dialect, stream, end)
    return stream.response


async def _not_streamed(
    dialect: ToolDialect[Any], up: UpstreamResponse, ctx_headers: Mapping[str, str]
) -> web.StreamResponse | Overflow:
    raw = await dialect.port.read(up)
    if up.status >= 400 and is_context_overflow(up.status, raw):
        return Overflow(overflow_numbers(raw))
    answer = json_object(raw) if up.status == 200 else None
    read = dialect.read(answer) if answer is not None else None
    if answer is not None and read is not None:  # the upstream ignored "stream": no call of ours may pass
        dialect.add_usage(read.usage)
        raw = orjson.dumps(dialect.final(answer))
    log_done(0, True, f"upstream_{up.status}")
    return await relay_body(up, raw, ctx_headers)


async def _continue(dialect: ToolDialect[E], stream: RoundsStream[E], end: E | None) -> None:
    """Answer our calls and relay the next round while the model calls ours only; then end the stream."""
    rounds = dialect.rounds
    while end is not None:
        read = end.read
        dialect.add_usage(read.usage)
        if end.error or not end.done or not _wants(dialect, read):
            await stream.close(_closing(dialect, end))
            return
        await dialect.answer_round(read)
        end = await stream.next_round(dialect.post, rounds, partial(dialect.feed, end))
    log_done(rounds.rounds, True, "interrupted")  # the client left, or the upstream failed (reported)


def _closing(dialect: ToolDialect[E], end: E) -> bytes:
    rounds = dialect.rounds.rounds
    if end.error or end.done:
        log_done(rounds, True, "error_event" if end.error else "answered")
        return dialect.closing(end)
    log.warning("upstream.stream_truncated", tool_rounds=rounds)
    log_done(rounds, True, "truncated")
    return dialect.truncated()

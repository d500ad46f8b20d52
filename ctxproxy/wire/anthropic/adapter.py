"""The pipeline's port for Anthropic's Messages API (``ctxproxy.pipeline.wire.WireAdapter``).

A body is parsed and checked whole (``body``), then its ``system`` and ``messages`` become ctxproxy's
message model (``convert.to_messages``): the pipeline compacts, injects memories and counts them
like any conversation. Writing back: the client's own bytes when nothing changed; else its body
with ``system`` and ``messages`` rewritten from the forwarded messages (``convert.render_body``:
tool results opening their user turn, roles as the API allows, at most four cache breakpoints,
one on the summary), every other field as the client sent it. The upstream's answer, JSON or
events, is relayed as it came (``forward``), and its usage (input plus cache tokens) teaches the
pipeline how Claude counts; until it has, pre-flight assumes ``count.CALIBRATION`` (``count_ratio``).
The window the client asked for is the one its ``anthropic-beta`` header opens (``betas``).

ctxproxy's tools are offered as Anthropic tools after the client's (``tools``), and compaction keeps
room for them (``proxy_tools_reserve``). With them offered, the Messages tool loop (``tool_loop``)
forwards, answers their calls and relays the final answer, JSON or streamed; it counts what its
rounds add as the pipeline counts a conversation (each message through ``convert.to_messages``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from multidict import MultiMapping

from ctxproxy.compaction.window_hints import WindowHint
from ctxproxy.config.models import TenantConfig
from ctxproxy.errors import Uncompactable
from ctxproxy.pipeline.turn import Augmented, Turn
from ctxproxy.pipeline.wire import BodyTools, Relayed, answer_tokens
from ctxproxy.services import HTTP, TOKENS
from ctxproxy.session import message_digest
from ctxproxy.tools.budget import Budget, Counting
from ctxproxy.tools.definitions import ProxyTools, with_tools
from ctxproxy.upstream.completion import Completion
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.wire.anthropic.betas import asked_window
from ctxproxy.wire.anthropic.blocks import check_messages
from ctxproxy.wire.anthropic.body import check_body, load_body
from ctxproxy.wire.anthropic.canonical import message_messages, system_messages
from ctxproxy.wire.anthropic.completion import MESSAGES_COMPLETION
from ctxproxy.wire.anthropic.convert import render_body, to_messages
from ctxproxy.wire.anthropic.count import CALIBRATION
from ctxproxy.wire.anthropic.forward import API_KEY, MESSAGES_PATH, forward_messages
from ctxproxy.wire.anthropic.tool_loop import forward_with_tools
from ctxproxy.wire.anthropic.tools import offer_tools
from ctxproxy.wire.incremental import BodyLoader, convert_all
from ctxproxy.wire.item_loop import ItemLoop

__all__ = ["AnthropicMessages", "parse_turn"]


def parse_turn(raw: bytes, load: BodyLoader | None = None) -> Turn:
    """Parse and check a Messages body; its conversation in ctxproxy's message model, or, when
    ctxproxy cannot model it, the reason (``Turn.as_sent``) with no conversation. ``load``: what
    parses the JSON (``ctxproxy.wire.incremental``)."""
    body = load_body(raw, load)
    try:
        request = check_body(body, raw)
        messages = system_messages(request.body) + convert_all(request.messages, _checked, load)
    except Uncompactable as reason:
        model = body.get("model")
        return Turn(body, raw, [], model if isinstance(model, str) else None, body.get("stream") is True, None, reason)
    return Turn(request.body, raw, messages, request.model, request.stream, request.user)


def _checked(messages: Sequence[Any], i: int) -> list[dict[str, Any]]:
    """``messages[i]`` checked, then converted (a previous body's conversion reuses both)."""
    check_messages(messages, i, i + 1)
    return message_messages(messages, i)


@dataclass(frozen=True)
class AnthropicMessages(BodyTools):
    @property
    def completion(self) -> Completion:
        return MESSAGES_COMPLETION

    def check_messages(self, messages: list[dict[str, Any]], start: int = 0, end: int | None = None) -> None:
        """Nothing left to check: ``parse_turn`` checked every block of the body."""

    def answer_reserve(self, turn: Turn) -> int:
        value = turn.body.get("max_tokens")
        return answer_tokens(value)

    def count_ratio(self, turn: Turn) -> float | None:
        return CALIBRATION  # Claude's tokenizer counts more than cl100k (``count``)

    def window_asked(self, turn: Turn, headers: MultiMapping[str]) -> WindowHint | None:
        return asked_window(headers)  # ``anthropic-beta: context-1m-…`` (``betas``)

    def offer_tools(self, turn: Turn, available: Sequence[str]) -> ProxyTools | None:
        return offer_tools(turn.body, available)

    async def forward(
        self,
        request: web.Request,
        tenant: TenantConfig,
        turn: Turn,
        forwarded: Augmented,
        headers: Mapping[str, str],
        budget: Budget,
    ) -> Relayed | Overflow:
        if forwarded.tools is None or forwarded.answers is None:
            if forwarded.messages is None:
                raw = turn.raw
            else:
                raw = orjson.dumps(render_body(turn.body, forwarded.messages, summary_index=forwarded.summary_at))
            return await forward_messages(request, request.app[HTTP], tenant, raw, turn.stream, headers)
        if forwarded.messages is None:
            body = with_tools(turn.body, forwarded.tools)
        else:
            extra = forwarded.tools.definitions
            body = render_body(turn.body, forwarded.messages, extra_tools=extra, summary_index=forwarded.summary_at)
        counting = _counting(request, turn)
        loop = ItemLoop.open(
            request, tenant, forwarded.tools, forwarded.answers, counting, MESSAGES_PATH, key_header=API_KEY
        )
        return await forward_with_tools(loop, body, turn.stream, headers, budget)


def _counting(request: web.Request, turn: Turn) -> Counting:
    """What the tool loop adds (Messages messages), counted as the pipeline counts the conversation."""
    counter = request.app[TOKENS]

    def count(message: Mapping[str, Any]) -> int:
        converted = to_messages({"messages": [message]})
        return sum(counter.count_message(m, message_digest(m), turn.model) for m in converted)

    return Counting(count_message=count, clip=lambda text, limit: counter.clip_text(text, limit, turn.model))

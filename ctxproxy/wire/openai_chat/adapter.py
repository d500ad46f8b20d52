"""The pipeline's port for OpenAI chat completions (``ctxproxy.pipeline.wire.WireAdapter``).

Writing back: the forwarded body is the client's own bytes when nothing changed; else its parsed
body with ``messages`` replaced (and ctxproxy's tools appended to ``tools``), every other field
as the client sent it. A stream is asked for its usage (``stream_options.include_usage``) unless
the client asked itself or the tenant's ``[upstream] stream_usage`` is off; the usage chunk is
then taken out again (``ctxproxy.upstream.usage``). The answer's ``usage.prompt_tokens`` is
reported to the pipeline only for a direct answer: a proxy-tool loop's rounds sent more. With
ctxproxy's tools offered, the proxy-tool loop (``ctxproxy.tools.loop``) forwards, answers their
calls and relays the final answer.
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
from ctxproxy.pipeline.turn import Augmented, Turn
from ctxproxy.pipeline.wire import BodyTools, Relayed, answer_tokens
from ctxproxy.services import HTTP, LOG_FIELDS, TOKENS
from ctxproxy.session import message_digest
from ctxproxy.tools.budget import Budget, Counting
from ctxproxy.tools.definitions import ProxyTools, offer_tools, with_tools
from ctxproxy.tools.loop import forward_with_tools
from ctxproxy.upstream.completion import Completion
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.upstream.usage import UsageTap, ask_for_usage, client_asked_usage
from ctxproxy.wire.openai_chat.body import check_messages
from ctxproxy.wire.openai_chat.completion import CHAT_COMPLETION
from ctxproxy.wire.openai_chat.forward import forward_chat

__all__ = ["OpenAIChat", "render", "reserved_output"]


@dataclass(frozen=True)
class OpenAIChat(BodyTools):
    @property
    def completion(self) -> Completion:
        return CHAT_COMPLETION

    def check_messages(self, messages: list[dict[str, Any]], start: int = 0, end: int | None = None) -> None:
        check_messages(messages, start, end)

    def answer_reserve(self, turn: Turn) -> int:
        return reserved_output(turn.body)

    def count_ratio(self, turn: Turn) -> float | None:
        return None  # ctxproxy's counter is OpenAI's own tokenizer (or within a few percent of it)

    def window_asked(self, turn: Turn, headers: MultiMapping[str]) -> WindowHint | None:
        return None  # chat completions choose a window by the model's name alone

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
        http = request.app[HTTP]
        if forwarded.tools is None or forwarded.answers is None:
            usage = UsageTap(strip=turn.stream and tenant.upstream.stream_usage and not client_asked_usage(turn.body))
            raw = render(turn, forwarded)
            sent = ask_for_usage(raw, turn.body) if usage.strip else raw
            answer = await forward_chat(request, http, tenant, sent, turn.stream, headers, usage)
            if isinstance(answer, Overflow):
                return answer
            return Relayed(answer, usage.prompt_tokens, usage.prompt_tokens_partial, usage.cached_tokens)
        messages = forwarded.messages if forwarded.messages is not None else turn.messages
        body = {**turn.body, "messages": list(messages)}
        counting = _counting(request, turn)
        tools, answers = forwarded.tools, forwarded.answers
        fields = request[LOG_FIELDS]
        answer = await forward_with_tools(
            request, http, tenant, body, turn.stream, headers, tools, answers, budget, counting, fields
        )
        # Its usage is the sum over rounds, whose prompts grew: it teaches nothing of the ratio.
        return answer if isinstance(answer, Overflow) else Relayed(answer)


def render(turn: Turn, forwarded: Augmented) -> bytes:
    """The upstream body: the client's own bytes when nothing changed."""
    if forwarded.messages is None and forwarded.tools is None:
        return turn.raw
    payload: dict[str, Any] = dict(turn.body)
    if forwarded.messages is not None:
        payload["messages"] = list(forwarded.messages)
    if forwarded.tools is not None:
        payload = with_tools(payload, forwarded.tools)
    return orjson.dumps(payload)


def reserved_output(body: Mapping[str, Any]) -> int:
    """What the request asks to keep free for the answer (``max_completion_tokens`` first)."""
    return answer_tokens(body.get("max_completion_tokens")) or answer_tokens(body.get("max_tokens"))


def _counting(request: web.Request, turn: Turn) -> Counting:
    counter = request.app[TOKENS]
    return Counting(
        count_message=lambda message: counter.count_message(message, message_digest(message), turn.model),
        clip=lambda text, limit: counter.clip_text(text, limit, turn.model),
    )

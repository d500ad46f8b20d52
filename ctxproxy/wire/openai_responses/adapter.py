"""The pipeline's port for OpenAI's Responses API (``ctxproxy.pipeline.wire.WireAdapter``).

A body is parsed and checked whole (``body``, ``items``), then its ``instructions`` and ``input``
become ctxproxy's message model (``canonical``): the pipeline compacts, injects memories and counts
them like any conversation. Writing back: the client's own bytes when nothing changed; else its
body with ``instructions`` and ``input`` rewritten from the forwarded messages (``render``: the
client's own items wherever a message is unchanged), every other field as the client sent it.
The answer, JSON or events, is relayed as it came (``forward``), and its ``usage.input_tokens``
teaches the pipeline how the upstream counts. Windows are chosen by the model's name alone; the
answer's reserve is ``max_output_tokens``.

ctxproxy's tools are offered as Responses function tools after the client's (``tools``), and
compaction keeps room for them (``proxy_tools_reserve``). With them offered, the one proxy-tool
loop (``ctxproxy.tools.driver``, in this protocol's shapes: ``tool_loop``) forwards, answers their
calls and relays the final answer, JSON or streamed.
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
from ctxproxy.pipeline.wire import BodyTools, Relayed, answer_tokens, fragment_counting
from ctxproxy.services import HTTP
from ctxproxy.tools.budget import Budget
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.upstream.completion import Completion
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.wire.item_loop import ItemLoop
from ctxproxy.wire.openai_responses.canonical import to_messages
from ctxproxy.wire.openai_responses.completion import RESPONSES_COMPLETION
from ctxproxy.wire.openai_responses.forward import RESPONSES_PATH, forward_responses
from ctxproxy.wire.openai_responses.render import render_body
from ctxproxy.wire.openai_responses.tool_loop import forward_with_tools
from ctxproxy.wire.openai_responses.tools import offer_tools

__all__ = ["OpenAIResponses", "render"]


@dataclass(frozen=True)
class OpenAIResponses(BodyTools):
    @property
    def completion(self) -> Completion:
        return RESPONSES_COMPLETION

    def check_messages(self, messages: list[dict[str, Any]], start: int = 0, end: int | None = None) -> None:
        """Nothing left to check: ``body.parse_turn`` checked every item of the body."""

    def answer_reserve(self, turn: Turn) -> int:
        value = turn.body.get("max_output_tokens")
        return answer_tokens(value)

    def count_ratio(self, turn: Turn) -> float | None:
        return None  # OpenAI's models: ctxproxy's counter is their tokenizer, or within a few percent

    def window_asked(self, turn: Turn, headers: MultiMapping[str]) -> WindowHint | None:
        return None  # the Responses API chooses a window by the model's name alone

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
            raw = turn.raw if forwarded.messages is None else orjson.dumps(render(turn, forwarded))
            return await forward_responses(request, request.app[HTTP], tenant, raw, turn.stream, headers)
        loop = ItemLoop.open(
            request,
            tenant,
            forwarded.tools,
            forwarded.answers,
            fragment_counting(request, turn.model, lambda f: to_messages({"input": f.get("input")})),
            RESPONSES_PATH,
        )
        return await forward_with_tools(loop, render(turn, forwarded), turn.stream, headers, budget)


def render(turn: Turn, forwarded: Augmented) -> dict[str, Any]:
    """The upstream body: the forwarded conversation (always a list of items) and ctxproxy's tools."""
    messages = forwarded.messages if forwarded.messages is not None else turn.messages
    extra = forwarded.tools.definitions if forwarded.tools is not None else ()
    return render_body(turn.body, messages, extra_tools=extra)

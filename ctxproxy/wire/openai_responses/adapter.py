"""The pipeline's port for OpenAI's Responses API (``ctxproxy.pipeline.wire.WireAdapter``).

A body is parsed and checked whole (``body``, ``items``), then its ``instructions`` and ``input``
become ctxproxy's message model (``canonical``): the pipeline compacts, injects memories and counts
them like any conversation. Writing back: the client's own bytes when nothing changed; else its
body with ``instructions`` and ``input`` rewritten from the forwarded messages (``render``: the
client's own items wherever a message is unchanged), every other field as the client sent it.
The answer, JSON or events, is relayed as it came (``forward``), and its ``usage.input_tokens``
teaches the pipeline how the upstream counts. Windows are chosen by the model's name alone; the
answer's reserve is ``max_output_tokens``.
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
from ctxproxy.pipeline.wire import Relayed
from ctxproxy.services import HTTP
from ctxproxy.tokens import TokenCounter
from ctxproxy.tools.budget import Budget
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.upstream.completion import Completion
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.wire.openai_responses.completion import RESPONSES_COMPLETION
from ctxproxy.wire.openai_responses.forward import forward_responses
from ctxproxy.wire.openai_responses.render import render_body

__all__ = ["OpenAIResponses", "render"]


@dataclass(frozen=True)
class OpenAIResponses:
    @property
    def completion(self) -> Completion:
        return RESPONSES_COMPLETION

    def check_messages(self, messages: list[dict[str, Any]], start: int = 0, end: int | None = None) -> None:
        """Nothing left to check: ``body.parse_turn`` checked every item of the body."""

    def answer_reserve(self, turn: Turn) -> int:
        value = turn.body.get("max_output_tokens")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    def count_ratio(self, turn: Turn) -> float | None:
        return None  # OpenAI's models: ctxproxy's counter is their tokenizer, or within a few percent

    def window_asked(self, turn: Turn, headers: MultiMapping[str]) -> WindowHint | None:
        return None  # the Responses API chooses a window by the model's name alone

    def tool_tokens(self, turn: Turn, counter: TokenCounter) -> int:
        tools = turn.body.get("tools")
        return counter.count_tools(tools, turn.model) if isinstance(tools, list) else 0

    def proxy_tools_reserve(self, tenant: TenantConfig, turn: Turn, counter: TokenCounter) -> int:
        return 0

    def offer_tools(self, turn: Turn, available: Sequence[str]) -> ProxyTools | None:
        return None

    async def forward(
        self,
        request: web.Request,
        tenant: TenantConfig,
        turn: Turn,
        forwarded: Augmented,
        headers: Mapping[str, str],
        budget: Budget,
    ) -> Relayed | Overflow:
        raw = render(turn, forwarded)
        return await forward_responses(request, request.app[HTTP], tenant, raw, turn.stream, headers)


def render(turn: Turn, forwarded: Augmented) -> bytes:
    """The upstream body: the client's own bytes when nothing changed."""
    if forwarded.messages is None and forwarded.tools is None:
        return turn.raw
    messages = forwarded.messages if forwarded.messages is not None else turn.messages
    extra = forwarded.tools.definitions if forwarded.tools is not None else ()
    return orjson.dumps(render_body(turn.body, messages, extra_tools=extra))

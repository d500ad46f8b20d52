"""The pipeline's port for Anthropic's Messages API (``ctxproxy.pipeline.wire.WireAdapter``).

A body is parsed and checked whole (``body``), then its ``system`` and ``messages`` become ctxproxy's
message model (``convert.to_messages``): the pipeline compacts, injects memories and counts them
like any conversation. Writing back: the client's own bytes when nothing changed; else its body
with ``system`` and ``messages`` rewritten from the forwarded messages (``convert.render_body``:
tool results opening their user turn, roles as the API allows, at most four cache breakpoints,
one on the summary), every other field as the client sent it. The upstream's answer, JSON or
events, is relayed as it came (``forward``), and its usage (input plus cache tokens) teaches the
pipeline how Claude counts; until it has, pre-flight assumes ``count.CALIBRATION`` (``count_ratio``).

Not yet: ctxproxy's recall tools are not offered to Messages clients (``offer_tools`` offers
none), so a ``paged`` archive is read back only through injected memories.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from ctxproxy.config.models import TenantConfig
from ctxproxy.pipeline.turn import Augmented, Turn
from ctxproxy.pipeline.wire import Relayed
from ctxproxy.services import HTTP
from ctxproxy.tokens import TokenCounter
from ctxproxy.tools.budget import Budget
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.upstream.completion import Completion
from ctxproxy.upstream.overflow import Overflow
from ctxproxy.wire.anthropic.body import parse_messages_body
from ctxproxy.wire.anthropic.completion import MESSAGES_COMPLETION
from ctxproxy.wire.anthropic.convert import render_body, to_messages
from ctxproxy.wire.anthropic.count import CALIBRATION
from ctxproxy.wire.anthropic.forward import forward_messages

__all__ = ["AnthropicMessages", "parse_turn"]


def parse_turn(raw: bytes) -> Turn:
    """Parse and check a Messages body; its conversation in ctxproxy's message model."""
    request = parse_messages_body(raw)
    return Turn(request.body, raw, to_messages(request.body), request.model, request.stream, request.user)


@dataclass(frozen=True)
class AnthropicMessages:
    @property
    def completion(self) -> Completion:
        return MESSAGES_COMPLETION

    def check_messages(self, messages: list[dict[str, Any]], start: int = 0, end: int | None = None) -> None:
        """Nothing left to check: ``parse_turn`` checked every block of the body."""

    def answer_reserve(self, turn: Turn) -> int:
        value = turn.body.get("max_tokens")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    def count_ratio(self, turn: Turn) -> float | None:
        return CALIBRATION  # Claude's tokenizer counts more than cl100k (``count``)

    def tool_tokens(self, turn: Turn, counter: TokenCounter) -> int:
        tools = turn.body.get("tools")
        return counter.count_tools(tools, turn.model) if isinstance(tools, list) else 0

    def proxy_tools_reserve(self, tenant: TenantConfig, turn: Turn, counter: TokenCounter) -> int:
        return 0  # none offered (module docstring)

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
        if forwarded.messages is None:
            raw = turn.raw
        else:
            raw = orjson.dumps(render_body(turn.body, forwarded.messages, summary_index=forwarded.summary_at))
        return await forward_messages(request, request.app[HTTP], tenant, raw, turn.stream, headers)

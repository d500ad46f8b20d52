"""The pipeline's port for Gemini's ``generateContent`` (``ctxproxy.pipeline.wire.WireAdapter``).

One adapter a request: it holds what the request's path and query said (``GeminiCall``: the model,
whether it streams, its headers and query as they go upstream). A body is parsed and checked
(``body``), its ``systemInstruction`` and ``contents`` become ctxproxy's message model
(``canonical``): the pipeline compacts, injects memories and counts them like any conversation.
Writing back: the client's own bytes when nothing changed; else its body with
``systemInstruction`` and ``contents`` rewritten from the forwarded messages (``render``: the
client's own contents wherever their messages are unchanged), every other field as sent. The
answer, JSON or events, is relayed as it came (``forward``), and its ``usageMetadata`` teaches the
pipeline how the model counts. Windows are chosen by the model's name alone; the answer's reserve
is ``generationConfig.maxOutputTokens``.

ctxproxy's tools are offered as function declarations after the client's tools (``tools``), and
compaction keeps room for them (``proxy_tools_reserve``). With them offered, the one proxy-tool
loop (``ctxproxy.tools.driver``, in this protocol's shapes: ``tool_loop``) forwards, answers their
calls and relays the final answer, JSON or streamed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

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
from ctxproxy.wire.gemini.canonical import to_messages
from ctxproxy.wire.gemini.completion import GeminiCompletion
from ctxproxy.wire.gemini.fields import field, has_field
from ctxproxy.wire.gemini.forward import API_KEY, GeminiCall, forward_gemini
from ctxproxy.wire.gemini.render import render_body
from ctxproxy.wire.gemini.tool_loop import forward_with_tools
from ctxproxy.wire.gemini.tools import offer_tools, with_tools
from ctxproxy.wire.item_loop import ItemLoop

__all__ = ["CALIBRATION", "GeminiGenerate"]

# Gemini tokens per cl100k token of the same text: no published comparison we could check, and
# Google's rule of thumb (a token is about 4 characters, 100 tokens about 60-80 English words) is
# cl100k's too. A prior until ctxproxy learns the model's own ratio from ``usageMetadata``.
CALIBRATION: Final = 1.0


@dataclass(frozen=True)
class GeminiGenerate(BodyTools):
    call: GeminiCall

    @property
    def completion(self) -> Completion:
        return GeminiCompletion(client_headers=self.call.headers)

    def check_messages(self, messages: list[dict[str, Any]], start: int = 0, end: int | None = None) -> None:
        """Nothing left to check: ``body.parse_turn`` checked every content of the body."""

    def answer_reserve(self, turn: Turn) -> int:
        config = field(turn.body, "generationConfig")
        value = field(config, "maxOutputTokens") if isinstance(config, Mapping) else None
        return answer_tokens(value)

    def count_ratio(self, turn: Turn) -> float | None:
        return CALIBRATION

    def window_asked(self, turn: Turn, headers: MultiMapping[str]) -> WindowHint | None:
        return None  # Gemini chooses a window by the model's name alone

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
        if forwarded.tools is not None and forwarded.answers is not None:
            messages = forwarded.messages if forwarded.messages is not None else turn.messages
            body = with_tools(render_body(turn.body, messages), forwarded.tools.definitions)
            call = self.call
            loop = ItemLoop.open(
                request,
                tenant,
                forwarded.tools,
                forwarded.answers,
                fragment_counting(request, turn.model, lambda f: to_messages({"contents": f.get("contents")})),
                call.path,
                key_header=API_KEY,
                headers=call.headers,
                query=call.query,
            )
            return await forward_with_tools(loop, body, call.stream, headers, budget)
        raw = turn.raw if forwarded.messages is None else orjson.dumps(render_body(turn.body, forwarded.messages))
        answer = await forward_gemini(request, request.app[HTTP], tenant, self.call, raw, headers)
        if isinstance(answer, Relayed) and has_field(turn.body, "cachedContent"):
            return Relayed(answer.response)  # part of the prompt is a cache ctxproxy never saw (``forward``)
        return answer

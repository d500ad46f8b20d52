"""The port a wire protocol implements for the pipeline (``ctxproxy.wire.<protocol>``).

The pipeline never reads or writes a body, an SSE event or a tool definition itself: it asks
the adapter. An adapter checks the client's messages, counts what its protocol adds around
them, says what window the client asked for in its protocol's terms (a beta header), offers
ctxproxy's tools in its protocol's shape, writes the forwarded conversation back into the
client's own body, forwards it (answering ctxproxy's tool calls itself) and relays the answer —
or reports an overflow the upstream stated before any byte reached the client — and reads what
the answer says of the prompt's size. Its ``completion`` is how ctxproxy asks the
request's upstream for a text of its own (LLM summaries, page lines), in the same protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from aiohttp import web
from multidict import MultiMapping

from ctxproxy.compaction.window_hints import WindowHint
from ctxproxy.config.models import TenantConfig
from ctxproxy.pipeline.turn import Augmented, Turn
from ctxproxy.services import TOKENS
from ctxproxy.session import message_digest
from ctxproxy.tokens import TokenCounter
from ctxproxy.tools.budget import Budget, Counting
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.tools.reserve import tools_reserve
from ctxproxy.upstream.completion import Completion
from ctxproxy.upstream.overflow import Overflow

__all__ = ["BodyTools", "Relayed", "WireAdapter", "fragment_counting"]


@dataclass(frozen=True)
class Relayed:
    """The answer went to the client; what it said of the prompt, when it said it."""

    response: web.StreamResponse
    prompt_tokens: int | None = None  # the upstream's own count of the prompt
    # The count may leave out the part of the prompt the provider billed as cached (some count it
    # apart): no sample of how the upstream counts the whole prompt.
    prompt_tokens_partial: bool = False
    # Of ``prompt_tokens``, those the provider read from its prompt cache, when it said (0 is a miss).
    cached_tokens: int | None = None


class BodyTools:
    """``WireAdapter.tool_definitions``, ``tool_tokens`` and ``proxy_tools_reserve`` for a protocol
    whose client tools are the body's ``tools`` list (OpenAI's chat completions and Responses,
    Anthropic's Messages): the adapter brings its ``offer_tools``."""

    def offer_tools(self, turn: Turn, available: Sequence[str]) -> ProxyTools | None:
        raise NotImplementedError

    def proxy_tools_reserve(self, tenant: TenantConfig, turn: Turn, counter: TokenCounter) -> int:
        return tools_reserve(tenant, partial(self.offer_tools, turn), counter, turn.model)

    def tool_definitions(self, turn: Turn) -> Sequence[Mapping[str, Any]]:
        tools = turn.body.get("tools")
        return tools if isinstance(tools, list) else []

    def tool_tokens(self, turn: Turn, counter: TokenCounter) -> int:
        return counter.count_tools(self.tool_definitions(turn), turn.model, True)  # the body's own


def answer_tokens(value: Any) -> int:
    """A body's answer limit (``max_tokens`` and its kin) as ``WireAdapter.answer_reserve`` takes
    it: a positive integer (a JSON ``true`` is not one), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def fragment_counting(
    request: web.Request, model: str | None, convert: Callable[[Mapping[str, Any]], list[dict[str, Any]]]
) -> Counting:
    """How a proxy-tool loop counts what it adds (fragments of its protocol's body, each made
    canonical messages by ``convert``), as the pipeline counts the conversation."""
    counter = request.app[TOKENS]

    def count(fragment: Mapping[str, Any]) -> int:
        return sum(counter.count_message(m, message_digest(m), model) for m in convert(fragment))

    return Counting(count_message=count, clip=lambda text, limit: counter.clip_text(text, limit, model))


class WireAdapter(Protocol):
    @property
    def completion(self) -> Completion:
        """How ctxproxy asks this protocol's upstream for one text answer of its own, with the
        request's credential (``completion.credential(request.headers)``)."""
        ...

    def check_messages(self, messages: list[dict[str, Any]], start: int = 0, end: int | None = None) -> None:
        """Refuse (``BadRequest`` naming the message) a malformed message in ``[start, end)``."""
        ...

    def answer_reserve(self, turn: Turn) -> int:
        """Tokens the request keeps free for the answer (its ``max_tokens``)."""
        ...

    def count_ratio(self, turn: Turn) -> float | None:
        """The upstream's tokens per ctxproxy token this protocol's models are known to count, a
        prior pre-flight uses until it has learned the model's own (None: assume 1)."""
        ...

    def window_asked(self, turn: Turn, headers: MultiMapping[str]) -> WindowHint | None:
        """The window the client asked for in this protocol's own terms (a beta header), if it did;
        the model's name is read by the pipeline (``ctxproxy.compaction.window_hints``)."""
        ...

    def tool_definitions(self, turn: Turn) -> Sequence[Mapping[str, Any]]:
        """The client's own tool definitions, as it sent them (none: empty)."""
        ...

    def tool_tokens(self, turn: Turn, counter: TokenCounter) -> int:
        """Tokens of the client's own tool definitions."""
        ...

    def proxy_tools_reserve(self, tenant: TenantConfig, turn: Turn, counter: TokenCounter) -> int:
        """Tokens ctxproxy's own tool definitions may take if they are offered."""
        ...

    def offer_tools(self, turn: Turn, available: Sequence[str]) -> ProxyTools | None:
        """ctxproxy's tools named ``available``, as this request may be offered them."""
        ...

    async def forward(
        self,
        request: web.Request,
        tenant: TenantConfig,
        turn: Turn,
        forwarded: Augmented,
        headers: Mapping[str, str],
        budget: Budget,
    ) -> Relayed | Overflow:
        """Send ``forwarded`` upstream in the client's body and relay the answer with ``headers``;
        ``Overflow`` when the upstream refused it as too long before anything was relayed.
        ``budget``: the model's window and the forwarded prompt's tokens, from which a proxy-tool
        loop counts what its rounds add."""
        ...

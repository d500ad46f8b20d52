"""The cache prefix of a request (``X-Ctx-Cache-Prefix: <messages>/<tokens>``): how much of the
forwarded prompt repeats the previous forwarded prompt of its session byte for byte — what a
provider's prompt cache can serve at its cached price — and, to price the prompt as the client
sent it, how much of that repeats the client's own previous prompt.

Measured on prints (``ctxproxy.session.prompt_prints``): the tool definitions as sent (the
client's, then ctxproxy's own when it offers them; a change there shares nothing), then each
message in ctxproxy's message model (a Messages ``system`` prompt is its first message). Tokens
are ctxproxy's counts of the shared messages, plus the tool definitions' when they are unchanged.
Cheap: the client's messages were digested and counted when the request was identified; of the
forwarded list only ctxproxy's own messages (a summary, memories) are digested, the client's are
recognised by identity, from the front and from the back. A first request shares nothing: 0/0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ctxproxy.pipeline.turn import Augmented
from ctxproxy.session import message_digest
from ctxproxy.session.prompt_prints import PromptPrint, SessionPrints, tools_digest
from ctxproxy.strategies.base import Message
from ctxproxy.tokens import TokenCounter

__all__ = ["CACHE_PREFIX_HEADER", "CachePrefix", "Measured", "Sent", "measure"]

CACHE_PREFIX_HEADER = "X-Ctx-Cache-Prefix"


class CachePrefix(NamedTuple):
    messages: int
    tokens: int

    @property
    def header(self) -> str:
        return f"{self.messages}/{self.tokens}"


class Sent(NamedTuple):
    """The client's prompt, as the request was identified: its messages with their digests and
    counts, its tool definitions and their count."""

    messages: Sequence[Message]
    digests: Sequence[bytes]
    tokens: Sequence[int]
    tools: Sequence[Mapping[str, Any]]
    tool_tokens: int
    total: int  # ``sum(tokens)``
    joined: bytes | None = None  # ``digests`` joined, when known (``PrefixChain.joined``)

    @property
    def print(self) -> PromptPrint:
        tools = tools_digest(self.tools)
        return PromptPrint(tools, self.joined) if self.joined is not None else PromptPrint.of(tools, self.digests)

    def leading(self, k: int) -> int:
        """``sum(tokens[:k])``, summed from the shorter end: a prompt repeats most of the last one."""
        if 2 * k > len(self.tokens):
            return self.total - sum(self.tokens[k:])
        return sum(self.tokens[:k])


class Measured(NamedTuple):
    prints: SessionPrints  # this request's, to remember once it was answered
    forwarded: CachePrefix  # of the forwarded prompt, shared with the previous forwarded one
    sent: CachePrefix  # of the client's prompt, shared with the client's previous one
    unchanged: bool  # the client's messages and tools were forwarded as they came


def measure(
    previous: SessionPrints | None, sent: Sent, added: Augmented, counter: TokenCounter, model: str | None
) -> Measured:
    """``previous``: the session's last request's prints (None: none is known here)."""
    sent_print = sent.print
    last_sent = previous.sent if previous is not None else None
    shared = sent_print.shared(last_sent)
    sent_leading = sent.leading(shared)
    sent_prefix = CachePrefix(shared, _tools_if(sent_print, last_sent, sent.tool_tokens) + sent_leading)

    messages = added.messages if added.messages is not None else sent.messages
    digests, source = _forwarded(sent, messages)
    proxy_tools = list(added.tools.definitions) if added.tools is not None else []
    tools = tools_digest([*sent.tools, *proxy_tools]) if proxy_tools else sent_print.tools
    # The client's own list and tools forwarded: its print (joined once, not twice).
    forwarded_print = sent_print if source is None and tools == sent_print.tools else PromptPrint.of(tools, digests)
    before = previous.forwarded if previous is not None else None
    # The client's prompt forwarded as it came, after one that was too: the same comparison.
    same = forwarded_print is sent_print and before is last_sent
    k = shared if same else forwarded_print.shared(before)
    tool_tokens = sent.tool_tokens + (counter.count_tools(proxy_tools, model) if proxy_tools else 0)
    tokens = _tools_if(forwarded_print, before, tool_tokens)
    if source is None:  # the client's own list: its counts, summed in C
        tokens += sent_leading if same else sent.leading(k)
    else:
        for i in range(k):
            at = source[i]
            tokens += sent.tokens[at] if at is not None else counter.count_message(messages[i], digests[i], model)
    unchanged = added.messages is None and added.tools is None
    return Measured(SessionPrints(sent_print, forwarded_print), CachePrefix(k, tokens), sent_prefix, unchanged)


def _tools_if(current: PromptPrint, previous: PromptPrint | None, tokens: int) -> int:
    """The tool definitions' tokens when the previous prompt had the same ones (and any)."""
    return tokens if previous is not None and previous.tools == current.tools and current.tools else 0


def _forwarded(sent: Sent, messages: Sequence[Message]) -> tuple[Sequence[bytes], list[int | None] | None]:
    """Each forwarded message's digest and the index of the client's message it is (None: one of
    ctxproxy's own; no list at all: the client's list itself). The client's are found by identity:
    the forwarded list keeps their order, a run of them at its front (system messages) and at its
    back (the newest), ctxproxy's between."""
    client = sent.messages
    if messages is client:
        return sent.digests, None
    source: list[int | None] = [None] * len(messages)
    front = 0
    while front < min(len(messages), len(client)) and messages[front] is client[front]:
        source[front] = front
        front += 1
    j = len(client) - 1
    for i in range(len(messages) - 1, front - 1, -1):
        if j >= front and messages[i] is client[j]:
            source[i] = j
            j -= 1
    digests = [
        sent.digests[at] if at is not None else message_digest(m) for m, at in zip(messages, source, strict=True)
    ]
    return digests, source

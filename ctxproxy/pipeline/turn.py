"""One client request, as its wire adapter parsed it: what the pipeline works on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ctxproxy.errors import Uncompactable
from ctxproxy.strategies.base import Message
from ctxproxy.tools.definitions import ProxyTools
from ctxproxy.tools.handlers import ToolAnswers


@dataclass(frozen=True)
class Turn:
    """``messages``: the conversation in ctxproxy's message model (``ctxproxy.vocabulary``'s roles,
    text or opaque parts, tool calls and results with ids), checked by the adapter as the
    pipeline asks (``WireAdapter.check_messages``); ``body`` and ``raw``: the client's own, from
    which the adapter writes what is forwarded, every field it does not understand untouched."""

    body: dict[str, Any]
    raw: bytes
    messages: list[dict[str, Any]]
    model: str | None
    stream: bool
    user: str | None  # the identity the body names (OpenAI ``user``), if any
    # Why ctxproxy cannot compact this request (``messages`` then empty): it is forwarded as sent.
    as_sent: Uncompactable | None = None


@dataclass(frozen=True)
class ToolOutputCounts:
    """The client's tool results this request forwards compressed and masked (``X-Ctx-Tool-Outputs``)."""

    compressed: int
    masked: int
    fresh: int  # of the compressed, those compressed for the first time
    saved: int  # prompt tokens the rewrite saved


class Augmented(NamedTuple):
    """What is forwarded: the conversation after compaction and augmentation (``augment``). A
    NamedTuple: made at every request, cheaper than a frozen dataclass, as immutable."""

    messages: Sequence[Message] | None  # None: forward the client's messages as they came
    tools: ProxyTools | None  # ctxproxy's tools, offered in this request
    answers: ToolAnswers | None  # what answers their calls
    tokens: int  # prompt tokens of the forwarded messages and of ctxproxy's tool definitions
    injected: int  # how many memories the injected messages carry (X-Ctx-Memories)
    summary_at: int | None = None  # where in ``messages`` the checkpoint's (last) summary message is
    tool_outputs: ToolOutputCounts | None = None  # None: tool outputs were not rewritten

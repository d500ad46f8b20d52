"""Identifying a request's conversation: check its messages, digest them, find its session,
count its tokens — doing each only for messages this process has not seen in that session — and
say which request of the session this process saw last, when this one does not carry it on (a
fork, ``ctxproxy.session.fork``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxproxy.pipeline.turn import Turn
from ctxproxy.pipeline.wire import WireAdapter
from ctxproxy.session import PrefixChain, SessionKey, message_digest, session_key
from ctxproxy.session.known import Known, KnownConversations, message_sizes, repeated, went_on
from ctxproxy.strategies.base import system_positions, systems_between
from ctxproxy.tokens import TokenCounter
from ctxproxy.vocabulary import ROLE_TOOL, ROLE_USER


@dataclass(frozen=True)
class Identified:
    key: SessionKey
    chain: PrefixChain
    tokens: tuple[int, ...]  # per message
    reused: int  # leading messages taken from what this process already knew
    systems: tuple[int, ...]  # where the system messages are
    total: int  # ``sum(tokens)``
    tool_at: int | None = None  # where the first tool result is (None: there is none)
    previous: Known | None = None  # the session's last request here, when this one does not repeat it all


def identify(
    wire: WireAdapter,
    chat: Turn,
    tenant: str,
    header: str | None,
    counter: TokenCounter,
    known: KnownConversations,
    owner: str | None = None,
) -> Identified:
    """``owner``: whose request it is (``session.fork.owner_of``), remembered with it."""
    messages = chat.messages
    key, anchor, anchor_digests, named = _session(wire, chat, tenant, header, known)
    last = named if named is not None else known.last(key.store_id)
    found = repeated(last, messages) if last is not None else None
    seen, reused = found if found is not None and found[1] >= anchor else (None, 0)
    carried_on = seen is not None and reused == len(seen.messages)
    encoding = counter.encoding_for(chat.model).name
    if carried_on and seen is not None and reused == len(messages) and seen.encoding == encoding:
        # The very messages of the last request again (a resent body): all it found holds.
        digests, tokens, sizes, systems, tool_at = seen.digests, seen.tokens, seen.sizes, seen.systems, seen.tool_at
        total = seen.token_sum if seen.token_sum is not None else sum(tokens)
        size = seen.size_sum if seen.size_sum is not None else sum(sizes)
    elif seen is not None:
        digests, tokens, sizes, total, size, systems, tool_at = _went_on(wire, chat, counter, encoding, seen, reused)
    else:
        digests, tokens, sizes, total, size = _measured(wire, chat, counter, anchor, anchor_digests)
        systems = system_positions(messages)
        tool_at = _first_tool(messages, 0)
    chain = _chain(digests, seen, reused, carried_on)
    named_by = anchor if anchor > 0 and messages[anchor - 1].get("role") == ROLE_USER else 0
    known.remember(
        key.store_id,
        Known(
            messages,
            digests,
            tokens,
            encoding,
            sizes,
            owner,
            systems,
            tool_at,
            chain,
            key,
            named_by,
            total,
            size,
        ),
    )
    return Identified(key, chain, tokens, reused, systems, total, tool_at, None if carried_on else last)


def _went_on(
    wire: WireAdapter, chat: Turn, counter: TokenCounter, encoding: str, seen: Known, reused: int
) -> tuple[tuple[bytes, ...], tuple[int, ...], tuple[int, ...], int, int, tuple[int, ...], int | None]:
    """The messages' digests, token counts (in ``encoding``), sizes, their sums, where the system
    messages and the first tool result are: the first ``reused`` taken from ``seen``, whose
    messages they repeat, only the rest (the new messages: a question, an answer and a question)
    checked and made, each walked once by each."""
    messages = chat.messages
    wire.check_messages(messages, reused)
    new = messages[reused:]
    fresh = tuple(map(message_digest, new))
    digests = seen.digests[:reused] + fresh  # a tuple's whole slice is itself: no copy when it went on
    if seen.encoding == encoding:
        tokens, total = went_on(seen.tokens, seen.token_sum, reused, tuple(counter.count_each(new, fresh, chat.model)))
    else:  # every count made anew
        tokens = tuple(counter.count_each(messages, digests, chat.model))
        total = sum(tokens)
    sizes, size = went_on(seen.sizes, seen.size_sum, reused, message_sizes(new))
    systems = seen.systems
    if systems and systems[-1] >= reused:
        systems = tuple(systems_between(systems, 0, reused))
    systems += system_positions(messages, reused)
    tool_at = seen.tool_at if seen.tool_at is not None and seen.tool_at < reused else _first_tool(messages, reused)
    return digests, tokens, sizes, total, size, systems, tool_at


def _measured(
    wire: WireAdapter, chat: Turn, counter: TokenCounter, anchor: int, anchor_digests: tuple[bytes, ...]
) -> tuple[tuple[bytes, ...], tuple[int, ...], tuple[int, ...], int, int]:
    """The messages' digests, token counts and sizes, and their sums, when no request of the
    session is known here: all made, but the first ``anchor`` digests (and checks), known."""
    messages = chat.messages
    wire.check_messages(messages, anchor)
    digests = anchor_digests + tuple(map(message_digest, messages[anchor:]))
    tokens = tuple(counter.count_each(messages, digests, chat.model))
    sizes = message_sizes(messages)
    return digests, tokens, sizes, sum(tokens), sum(sizes)


def _session(
    wire: WireAdapter, chat: Turn, tenant: str, header: str | None, known: KnownConversations
) -> tuple[SessionKey, int, tuple[bytes, ...], Known | None]:
    """The session's key, how many messages name it, their digests, and the session's entry when
    the naming messages are its very objects, checked before (``KnownConversations.named``)."""
    named = known.named(tenant, header, chat.messages)
    if named is not None and named.key is not None:
        return named.key, named.anchor, named.digests[: named.anchor], named
    anchor = _check_anchor(wire, chat)
    digests = tuple(map(message_digest, chat.messages[:anchor]))
    return session_key(tenant, chat.messages, PrefixChain(digests), header), anchor, digests, None


def _chain(digests: tuple[bytes, ...], seen: Known | None, reused: int, carried_on: bool) -> PrefixChain:
    """``digests`` hashed, on from the chain of ``seen`` (the request whose leading messages this
    one repeats): past all its digests when this request carries it on (``carried_on``; made from
    them when that chain holds that request's digests), else past all but its last when that is
    all this one repeats (a new last message: ``forked``, when made from that chain's digests)."""
    if seen is None or seen.chain is None:
        return PrefixChain.hashed(digests)
    previous = seen.chain
    made = previous.digests is seen.digests and len(seen.messages) == len(previous.digests)
    if carried_on:
        return PrefixChain.hashed(digests, previous, made_on=made)
    # ``digests`` were made as ``seen.digests[:reused]`` and more (``_went_on``)
    return PrefixChain.hashed(digests, previous, forked=made and reused == len(previous.digests) - 1)


def _first_tool(messages: list[dict[str, Any]], start: int) -> int | None:
    """Where the first tool result of ``messages[start:]`` is."""
    return next((i for i in range(start, len(messages)) if messages[i].get("role") == ROLE_TOOL), None)


def _check_anchor(wire: WireAdapter, chat: Turn) -> int:
    """Check the messages through the first user message (they name the session); their count."""
    for i, message in enumerate(chat.messages):
        wire.check_messages(chat.messages, i, i + 1)
        if message["role"] == ROLE_USER:
            return i + 1
    return min(1, len(chat.messages))

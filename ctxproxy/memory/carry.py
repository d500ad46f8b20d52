"""Note 001's ``## Relevant Memories``, carried with the conversation instead of rebuilt each turn.

Providers bill a prompt's repeated prefix at about a tenth, so what ctxproxy adds must keep the
bytes the upstream has already seen. A block rebuilt before the newest user message on every
turn is never cached, and it moves everything after it. So a block is made **once**, for the
request whose newest user message it answers, and goes at that message (right before it, or
right after it when it opens with tool results: ``ctxproxy.memory.inject.block_side``) — in the
part of the conversation the upstream has not seen yet. The following requests of the
conversation re-send it byte for byte at the same place, and a new block is made only when a new
user message asks for memories that no carried block holds yet: it holds only those, within what
the carried blocks leave of the budget (``inject_max_tokens``, which the window keeps free), each
memory given the room it would have in a full block (``inject_max_tokens / inject_top_k``). When
the carried blocks have used the budget, the new user message gets no new block until a
compaction frees room: breaking the cache for a memory costs more than the memory is worth, and
``search_memory`` still finds it.

A carried block names its client message by index and by the prefix hash through it
(``ctxproxy.session.digest``): a request that does not hold that very message there — an edited
or forked history — does not get the block; nor does one after a memory it holds was deleted
(the admin API): the caller checks its documents are still there. A compaction that covers the
message drops the block with the prefix it sat in (the summary replaces those bytes anyway); its
memories may then be chosen again. ``carry`` is pure: the caller keeps its answer per session
(``ctxproxy.memory.pins``) and passes it back with the next request; without one (another
replica, a restart) the next block is made as for a first request — a cache miss, never a wrong
answer.

``carry`` is ``check`` (which carried blocks the request still holds, and its newest user
message's anchor) then ``made`` (a new block of what the search found): a caller asks
``Checked.wants`` in between, and need not search when no new block can be made — the carried
blocks used the budget, or the newest user message was asked before.

The prefix hashes that check the carried blocks are the request chain's: a chain that goes on
from the previous request's answers the lengths that one was asked for, and hashes on over the
new digests only (``PrefixChain.hashed``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ctxproxy.memory.inject import MemoryBlock, block_side, fitted, normalised
from ctxproxy.session.digest import PrefixChain
from ctxproxy.strategies.base import Message
from ctxproxy.tokens import TOKENS_PER_MESSAGE

# What one block costs besides its text: the message's own tokens and its role's.
BLOCK_OVERHEAD = TOKENS_PER_MESSAGE + 1

__all__ = ["Anchor", "Carried", "Checked", "Placed", "carry", "check", "made"]


@dataclass(frozen=True)
class Anchor:
    """A client message: its index in the client's list and the prefix hash through it."""

    index: int
    prefix: bytes

    def holds(self, hashes: dict[int, bytes]) -> bool:
        """Whether the request whose prefix hashes (by length) these are has this message here."""
        return hashes.get(self.index + 1) == self.prefix


@dataclass(frozen=True)
class Placed:
    """One block as sent: at the client message ``at`` (right before it, or right after it with
    ``after``); its text, the memories it holds (``normalised``) and their documents' ids, how
    many, and its tokens as a message."""

    at: Anchor
    after: bool
    text: str
    memories: frozenset[str]
    ids: frozenset[str]
    count: int
    tokens: int


@dataclass(frozen=True)
class Carried:
    """What a session's requests carry: ``placed``, oldest first, and the newest user message a
    block was last looked for (``asked``): a request with the same one gets no new block (an
    agent's tool loop, a retry)."""

    placed: tuple[Placed, ...] = ()
    asked: Anchor | None = None

    @property
    def ids(self) -> frozenset[str]:
        """The documents the carried blocks hold."""
        return frozenset().union(*(block.ids for block in self.placed))


def carry(
    previous: Carried | None,
    messages: Sequence[Message],
    chain: PrefixChain,
    newest: int | None,
    cut: int,
    wanted: MemoryBlock | None,
    top_k: int,
    count: Callable[[str], int],
    gone: frozenset[str] = frozenset(),
) -> Carried:
    """What this request carries (see the module doc): ``made`` of ``check``.

    ``messages`` and their ``chain``: the client's; ``newest``: the index of its newest user message (None:
    none); ``cut``: where its raw messages begin (the checkpoint's ``end``, else 0); ``wanted``:
    the memories the search found for it, best first, with the whole budget as ``max_tokens``;
    ``top_k``: how many a full block holds; ``gone``: documents deleted since (a block holding
    one is not sent again)."""
    return made(check(previous, chain, newest, cut, gone), messages, wanted, top_k, count)


@dataclass(frozen=True)
class Checked:
    """What a request keeps of the blocks carried before (``kept``), the anchor of its newest
    user message (``asked``; None: none after the cut)."""

    previous: Carried
    kept: tuple[Placed, ...]
    asked: Anchor | None

    def wants(self, max_tokens: int, top_k: int) -> bool:
        """Whether a new block may be made for ``asked`` (a block budget of ``max_tokens`` for
        ``top_k`` memories): only then does ``made`` read what the search found."""
        asked = self.asked
        if asked is None or asked == self.previous.asked or any(block.at == asked for block in self.kept):
            return False
        return _room(self.kept, max_tokens, top_k)[1] > 0


def check(
    previous: Carried | None, chain: PrefixChain, newest: int | None, cut: int, gone: frozenset[str] = frozenset()
) -> Checked:
    """Which carried blocks the request still holds, and its newest user message's anchor."""
    previous = previous if previous is not None else Carried()
    lengths = [block.at.index + 1 for block in previous.placed]
    if newest is not None:
        lengths.append(newest + 1)
    hashes = chain.prefix_hashes(lengths)
    kept = tuple(
        block for block in previous.placed if block.at.index >= cut and block.at.holds(hashes) and not block.ids & gone
    )
    asked = Anchor(newest, hashes[newest + 1]) if newest is not None and newest >= cut else None
    return Checked(previous, kept, asked)


def made(
    checked: Checked,
    messages: Sequence[Message],
    wanted: MemoryBlock | None,
    top_k: int,
    count: Callable[[str], int],
) -> Carried:
    """What the request carries once checked: the kept blocks and, when ``checked.wants`` one,
    a new block of ``wanted``'s memories that no kept block holds."""
    kept, asked = checked.kept, checked.asked
    if asked is None or wanted is None or not checked.wants(wanted.max_tokens, top_k):
        return Carried(kept, asked)
    block = _new_block(kept, asked, block_side(messages, asked.index), wanted, top_k, count)
    return Carried(kept if block is None else (*kept, block), asked)


def _room(kept: Sequence[Placed], max_tokens: int, top_k: int) -> tuple[int, int]:
    """The tokens ``kept`` leaves of the budget (their messages included), and how many memories
    a new block may hold in them (each given the room it would have in a full block)."""
    room = max_tokens - sum(block.tokens for block in kept)
    return room, max(0, room // max(1, max_tokens // max(1, top_k)))


def _new_block(
    kept: tuple[Placed, ...],
    asked: Anchor,
    after: bool,
    wanted: MemoryBlock,
    top_k: int,
    count: Callable[[str], int],
) -> Placed | None:
    """The block for the memories of ``wanted`` that ``kept`` does not hold, in the room it leaves."""
    said = frozenset().union(*(block.memories for block in kept))
    room, fits = _room(kept, wanted.max_tokens, top_k)
    new = [memory for memory in wanted.memories if normalised(memory.text) not in said][:fits]
    if not new:
        return None
    made = fitted(replace(wanted, memories=new, max_tokens=room, rendered=None), count)
    if made is None:
        return None
    text, memories = made
    said_now = frozenset(normalised(m.text) for m in memories)
    ids = frozenset(m.ident for m in memories if m.ident)
    return Placed(asked, after, text, said_now, ids, len(memories), count(text) + BLOCK_OVERHEAD)

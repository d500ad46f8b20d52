"""Auto-injection (notes 001 and 002): the memories that match the newest user message, inserted
into what is forwarded as messages of ctxproxy's own.

Pure: the caller searches (I/O) and passes the hits; this module picks what fits the budget,
renders it and places it. The last message stays the client's. Note 001's injection sits right
before the newest user message, so everything in front of it — system prompt, summary,
Contents Page, kept turns — keeps its bytes and the provider's prompt cache keeps hitting. In
an agent's tool loop (the last message a tool result) the same query finds the same memories,
so the injection stays where it was and does not move.

Each injected message is a ``MemoryBlock``: a header and the memories that fit its budget.
Layered (note 002): ``front`` blocks — ``## User Memory``, ``## Scope Memory``, each with its own
budget — go right after the system prompt (and the system messages a summary covered), ahead of
the summary, and nothing goes before the newest user message; their memories are listed oldest
first, so a block whose memories stay the same keeps its bytes (and the caller keeps the blocks
themselves between two compressions: ``ctxproxy.memory.pins``). Otherwise one ``near`` block,
``## Relevant Memories``, best first, goes just before the newest user message.

**Only inserts, never removes.** An injection exists only in what ctxproxy forwards: the client
never receives it, so it never comes back in a client's history. ``inject`` is always given a
list without one — the client's messages, or the compacted list ``assemble`` built from them
(checkpoints, archived pages and a pending re-run all keep the client's own messages); the
overflow retry injects again into the *re-compacted* client list, not into what it forwarded
first; and the proxy-tool loop appends its rounds after the injection and never injects again.
So nothing in the input is taken for an earlier injection: a client message that starts with
``## Relevant Memories`` or is named ``memory_context`` is the client's and goes through as it
came. ``Injection.positions`` says which messages ctxproxy inserted — by position, the only
thing that can tell them apart from a client's look-alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from ctxproxy.strategies.base import Message
from ctxproxy.vocabulary import PLACEMENT_ASSISTANT_NAMED, ROLE_ASSISTANT, ROLE_USER, Placement

HEADER = "## Relevant Memories"
LAYER_HEADERS = {"user": "## User Memory", "scope": "## Scope Memory"}  # note 002's front blocks, in order
INJECTION_NAME = "memory_context"
QUERY_MAX_CHARS = 2000  # a pasted document is not a query; its start says what it is about
T = TypeVar("T")


@dataclass(frozen=True)
class Memory:
    """One search hit as the injection sees it."""

    text: str
    label: str  # "decision", "page 12", ...
    created_at: float = 0.0


@dataclass(frozen=True)
class MemoryBlock:
    """One injected message: ``header`` and, one bullet each, the ``memories`` (best first) that
    fit ``max_tokens``; ``chronological``: listed oldest first instead of best first."""

    header: str
    memories: Sequence[Memory]
    max_tokens: int
    chronological: bool = False
    rendered: tuple[str, int] | None = None  # ``render``'s answer, when it was kept (a pinned block)

    def without_said(self, said: str) -> MemoryBlock:
        """The block without the memories ``said`` (the forwarded summary) already says word for
        word — a summary's own cards, say: injecting them again would only repeat it."""
        flat = " ".join(said.split())
        kept = [m for m in self.memories if " ".join(m.text.split()) not in flat]
        return self if len(kept) == len(self.memories) else replace(self, memories=kept, rendered=None)

    def kept_rendered(self, count: Callable[[str], int]) -> MemoryBlock:
        """The block with its rendering kept (``render`` then costs nothing)."""
        return replace(self, rendered=render(self, count))


@dataclass(frozen=True)
class Injection:
    """The forwarded list: the input, every message in its order and unchanged, with ctxproxy's
    injected messages at ``positions`` (ascending)."""

    messages: list[Message]
    positions: tuple[int, ...] = ()
    memories: int = 0  # how many memories the injected messages carry

    @property
    def added(self) -> list[Message]:
        return [self.messages[i] for i in self.positions]


def newest_user_index(messages: Sequence[Message], start: int = 0) -> int | None:
    """The index of the newest ``user`` message at or after ``start``, else None."""
    for i in range(len(messages) - 1, start - 1, -1):
        if messages[i].get("role") == ROLE_USER:
            return i
    return None


def message_text(message: Message) -> str:
    """The text of a message's content: a string, or the text parts of a content list."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def query_for(messages: Sequence[Message]) -> str | None:
    """The newest user message's text, the search query; None when there is none."""
    index = newest_user_index(messages)
    if index is None:
        return None
    text = message_text(messages[index]).strip()
    return text[:QUERY_MAX_CHARS] or None


def with_newest(best: Sequence[T], newest: Sequence[T], top_k: int) -> list[T]:
    """``best``, then the newest of ``newest`` (given oldest first) it lacks, ``top_k`` in all."""
    out = list(best[:top_k])
    for item in reversed(newest):
        if len(out) >= top_k:
            break
        if item not in out:
            out.append(item)
    return out


def render(block: MemoryBlock, count: Callable[[str], int]) -> tuple[str, int] | None:
    """The block's text — its header and one bullet per memory, as many as fit its budget, best
    first — and how many that is; None when none fits. A long memory (a whole archived page) is
    cut so that one hit cannot take the whole budget."""
    if block.rendered is not None:
        return block.rendered
    memories, max_tokens = block.memories, block.max_tokens
    if not memories or max_tokens <= 0:
        return None
    share = max(16, max_tokens // len(memories))
    used = count(block.header)
    kept: list[tuple[int, str]] = []
    for rank, memory in enumerate(memories):
        line = f"- ({memory.label}) {_clip(memory.text, share, count)}"
        cost = count(line) + 1
        if used + cost > max_tokens:
            continue  # a shorter one further down may still fit
        kept.append((rank, line))
        used += cost
    if not kept:
        return None
    if block.chronological:
        kept.sort(key=lambda item: (memories[item[0]].created_at, item[0]))
    return "\n".join([block.header, *(line for _, line in kept)]), len(kept)


def inject(
    messages: Sequence[Message],
    count: Callable[[str], int],
    placement: Placement,
    *,
    near: MemoryBlock | None = None,
    front: Sequence[MemoryBlock] = (),
    head: int = 0,
    raw_from: int | None = None,
) -> Injection:
    """``messages`` with the injection(s) inserted (see the module doc); nothing is removed.

    ``head``: where the ``front`` blocks go — after the leading system messages (and the system
    messages a summary covered), before the summary. ``raw_from`` (default ``head``): where the
    client's raw messages begin, past any summary; the newest user message, before which the
    ``near`` block goes, is looked for there.
    """
    out = list(messages)
    target = newest_user_index(out, head if raw_from is None else raw_from)
    if target is None:
        return Injection(out)
    injected = 0
    positions: list[int] = []
    rendered = render(near, count) if near is not None else None
    if rendered is not None:
        out.insert(target, _message(rendered[0], placement))
        positions.append(target)
        injected += rendered[1]
    added: list[Message] = []
    for block in front:
        if (made := render(block, count)) is not None:
            added.append(_message(made[0], placement))
            injected += made[1]
    if added:
        out[head:head] = added
        positions = [*range(head, head + len(added)), *(p + len(added) for p in positions)]
    return Injection(out, tuple(positions), injected)


def _message(text: str, placement: Placement) -> dict[str, Any]:
    if placement == PLACEMENT_ASSISTANT_NAMED:
        return {"role": ROLE_ASSISTANT, "name": INJECTION_NAME, "content": text}
    return {"role": placement, "content": text}


def _clip(text: str, max_tokens: int, count: Callable[[str], int]) -> str:
    flat = " ".join(text.split())
    if count(flat) <= max_tokens:
        return flat
    cut = flat[: max_tokens * 4]
    while cut and count(cut + " …") > max_tokens:
        cut = cut[: int(len(cut) * 0.8)]
    return cut.rstrip() + " …"

"""Auto-injection (notes 001 and 002): the memories that match the newest user message, inserted
into what is forwarded as messages of ctxproxy's own.

Pure: the caller searches (I/O) and passes the hits; this module picks what fits a budget,
renders it and places it. Two kinds of block:

- note 001's ``## Relevant Memories`` blocks go among the client's messages, each at the user
  message it was made for (``block_side``): right before it — or right after it when it opens
  with tool results, as a user typing while tools ran sends them (on the Messages API results
  and text are one message, which is never split). They are ``user`` messages: ctxproxy never
  writes a turn in the assistant's name in the client's part of the conversation. Which blocks
  a request carries, and where, is ``ctxproxy.memory.carry``'s business: made once, they are
  re-sent byte for byte at their place.
- note 002's ``front`` blocks — ``## User Memory``, ``## Scope Memory``, each with its own
  budget — go right after the system prompt (and the system messages a summary covered), ahead
  of the summary, in the tenant's ``summary_placement``; their memories are listed oldest first,
  so a block whose memories stay the same keeps its bytes (and the caller keeps the blocks
  themselves: ``ctxproxy.memory.pins``).

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
from ctxproxy.vocabulary import PLACEMENT_ASSISTANT_NAMED, RESULT_ROLES, ROLE_ASSISTANT, ROLE_USER, Placement

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
    ident: str = ""  # the document's id in its layer ("": not known)


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
        flat = normalised(said)
        kept = [m for m in self.memories if normalised(m.text) not in flat]
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
    cut to its ``fair_share`` of the budget, so that one hit cannot take the room of the others."""
    if block.rendered is not None:
        return block.rendered
    made = fitted(block, count)
    return None if made is None else (made[0], len(made[1]))


def fitted(block: MemoryBlock, count: Callable[[str], int]) -> tuple[str, tuple[Memory, ...]] | None:
    """``render``'s text and the memories it holds (in the block's order); None when none fits."""
    memories, max_tokens = block.memories, block.max_tokens
    if not memories or max_tokens <= 0:
        return None
    used = count(block.header)
    flat = [normalised(memory.text) for memory in memories]
    labels = sum(count(f"- ({memory.label}) ") + 1 for memory in memories)
    sizes = [count(text) for text in flat]
    share = max(16, fair_share(sizes, max_tokens - used - labels))
    kept: list[tuple[int, str]] = []
    for rank, memory in enumerate(memories):
        text = flat[rank] if sizes[rank] <= share else _clip(flat[rank], share, count)
        line = f"- ({memory.label}) {text}"
        cost = count(line) + 1
        if used + cost > max_tokens:
            continue  # a shorter one further down may still fit
        kept.append((rank, line))
        used += cost
    if not kept:
        return None
    if block.chronological:
        kept.sort(key=lambda item: (memories[item[0]].created_at, item[0]))
    text = "\n".join([block.header, *(line for _, line in kept)])
    return text, tuple(memories[rank] for rank, _ in kept)


def fair_share(sizes: Sequence[int], room: int) -> int:
    """The most tokens each memory may keep so that all of them fit ``room``: the sizes up to
    it are kept whole (water-filling). A short memory leaves what it does not use to the long
    ones instead of an even split cutting a long page while the budget stays half empty; none
    can take the room of the others. The largest size when everything fits."""
    left, pending = room, len(sizes)
    for size in sorted(sizes):
        if size * pending > left:
            return max(0, left // pending)
        left -= size
        pending -= 1
    return max(sizes, default=0)


def normalised(text: str) -> str:
    """A memory's text as compared with what was said before: whitespace runs as one space."""
    return " ".join(text.split())


def block_side(messages: Sequence[Message], newest: int) -> bool:
    """Whether the block for the user message ``newest`` goes right after it (True) or right
    before it: after it when tool results come right before it — on the Messages API they are
    the same client message (``tool_result`` blocks first, then the text), which a block put
    before the text would split, and put before the results would cut from their call."""
    return newest > 0 and messages[newest - 1].get("role") in RESULT_ROLES


@dataclass(frozen=True)
class Insert:
    """A ``## Relevant Memories`` block to forward right before ``messages[at]`` (right after it
    with ``after``)."""

    at: int
    text: str
    memories: int
    after: bool = False

    @property
    def slot(self) -> int:
        """Where it goes in ``messages``: the gap before this index."""
        return self.at + 1 if self.after else self.at


def inject(
    messages: Sequence[Message],
    count: Callable[[str], int],
    placement: Placement,
    *,
    inserts: Sequence[Insert] = (),
    front: Sequence[MemoryBlock] = (),
    head: int = 0,
) -> Injection:
    """``messages`` with ctxproxy's blocks inserted (see the module doc); nothing is removed.

    ``inserts``: blocks each at the message they name (as ``user`` messages), in the order given
    where two share a gap; an insert past the end, or before ``head``, is left out. ``head``:
    where the ``front`` blocks go —
    after the leading system messages (and the system messages a summary covered), before the
    summary — in ``placement``.
    """
    out = list(messages)
    injected = 0
    positions: list[int] = []
    for insert in reversed(sorted(inserts, key=lambda item: item.slot)):  # from the back: none moves another
        if head <= insert.at < len(messages):
            out.insert(insert.slot, {"role": ROLE_USER, "content": insert.text})
            positions = [insert.slot, *(p + 1 for p in positions)]
            injected += insert.memories
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


def _clip(flat: str, max_tokens: int, count: Callable[[str], int]) -> str:
    """``flat``, longer than ``max_tokens``, cut to fit them with an ellipsis."""
    cut = flat[: max_tokens * 4]
    while cut and count(cut + " …") > max_tokens:
        cut = cut[: int(len(cut) * 0.8)]
    return cut.rstrip() + " …"

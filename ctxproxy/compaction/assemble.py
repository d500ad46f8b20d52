"""Building the message list that is forwarded: head, summary, kept raw messages.

``[head (leading system)] [system messages of the covered range] [summary] [restored] [messages[end:]]``

``summary``: the checkpoint's summary message, as its kind renders it, in the tenant's
``summary_placement`` — or several, when the kind shows its blocks one message each
(``BlockKinds.texts``: ``rounds``' Session Memory, whose compressions append a block and leave
the messages already sent as they were). ``restored``: covered messages the checkpoint's kind
forwards again right after its summary (``ctxproxy.strategies.execution.Shown``: the pages the
model recalled, with ``paged``). And the branch summaries the request gets
(``ctxproxy.strategies.branch``), each its own ``user`` message before the client's message it
names — right after the summary (before what is restored) when the summary covers that one. A
branch summary sits among the client's messages, where ctxproxy never writes in the assistant's
name, whatever the summary's placement.

Everything here is deterministic: the same checkpoint and messages give the same list, and so
the same bytes, which is what keeps provider prompt caches hitting between compactions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxproxy.strategies.base import SYSTEM_ROLES, Block, Checkpoint, Message, systems_between
from ctxproxy.strategies.kinds import HISTORY, BlockKinds
from ctxproxy.vocabulary import PLACEMENT_ASSISTANT_NAMED, ROLE_ASSISTANT, ROLE_TOOL, ROLE_USER, Placement


def summary_message(checkpoint: Checkpoint, placement: Placement, kinds: BlockKinds) -> dict[str, Any]:
    """The message that stands for ``checkpoint``'s blocks, as their kind renders them."""
    return _placed(kinds.render(checkpoint.blocks), placement, kinds.of(checkpoint.blocks).message_name)


def summary_messages(checkpoint: Checkpoint, placement: Placement, kinds: BlockKinds) -> list[dict[str, Any]]:
    """The messages that stand for ``checkpoint``'s blocks: one, or one per block when their kind
    shows them so (``BlockKinds.texts``)."""
    name = kinds.of(checkpoint.blocks).message_name
    return [_placed(text, placement, name) for text in kinds.texts(checkpoint.blocks)]


def branch_message(branch: Checkpoint, kinds: BlockKinds) -> dict[str, Any]:
    """A branch summary's message: a ``user`` one, as it goes among the client's messages."""
    return {"role": ROLE_USER, "content": kinds.render(branch.blocks)}


def _placed(content: str, placement: Placement, name: str) -> dict[str, Any]:
    if placement == PLACEMENT_ASSISTANT_NAMED:
        return {"role": ROLE_ASSISTANT, "name": name, "content": content}
    return {"role": placement, "content": content}


def empty_summary_message(placement: Placement, kinds: BlockKinds) -> dict[str, Any]:
    """The summary message of a checkpoint whose one history block says nothing: what every
    summary message costs besides its text (``Conversation.summary_overhead``)."""
    return summary_message(Checkpoint(0, "", (Block(0, 0, "", HISTORY.name),), 0.0), placement, kinds)


def covered_system(
    messages: Sequence[Message], head: int, checkpoint: Checkpoint, systems: Sequence[int] | None = None
) -> list[Message]:
    """The system messages of the summarised range, forwarded verbatim before the summary
    (``systems``: where the system messages are, when the caller knows)."""
    if systems is None:
        return [m for m in messages[head : checkpoint.end] if m.get("role") in SYSTEM_ROLES]
    return [messages[i] for i in systems_between(systems, head, checkpoint.end)]


def summary_index(
    messages: Sequence[Message], head: int, checkpoint: Checkpoint, systems: Sequence[int] | None = None
) -> int:
    """Where ``assemble`` puts the (first) summary message in the list it forwards."""
    return head + len(covered_system(messages, head, checkpoint, systems))


def summary_count(checkpoint: Checkpoint, kinds: BlockKinds) -> int:
    """How many summary messages ``assemble`` forwards for ``checkpoint``: as many as
    ``BlockKinds.texts`` gives, counted without rendering the one text of a kind that shows its
    blocks as one message."""
    shown = kinds.of(checkpoint.blocks).messages(checkpoint.blocks)
    return len(shown) if shown else 1


def assemble(
    messages: Sequence[Message],
    head: int,
    checkpoint: Checkpoint | None,
    placement: Placement,
    kinds: BlockKinds,
    restored: Sequence[Message] = (),
    systems: Sequence[int] | None = None,
) -> list[Message]:
    if checkpoint is None:
        return list(messages)
    system = covered_system(messages, head, checkpoint, systems)
    summaries = summary_messages(checkpoint, placement, kinds)
    return [*messages[:head], *system, *summaries, *restored, *messages[checkpoint.end :]]


def forwarded_index(
    messages: Sequence[Message],
    head: int,
    checkpoint: Checkpoint | None,
    i: int,
    restored: int = 0,
    summaries: int = 1,
) -> int:
    """Where the client's message ``i`` is in what ``assemble`` forwards with ``checkpoint`` (shown
    as ``summaries`` messages) and ``restored`` messages after its summary; for a covered one,
    the position right after the summary."""
    if checkpoint is None:
        return i
    after = restored + i - checkpoint.end if i >= checkpoint.end else 0
    return summary_index(messages, head, checkpoint) + summaries + after


def with_branches(
    forwarded: Sequence[Message],
    messages: Sequence[Message],
    head: int,
    checkpoint: Checkpoint | None,
    branches: Sequence[Checkpoint],
    kinds: BlockKinds,
    restored: int = 0,
) -> list[Message]:
    """``forwarded`` (``assemble``'s list with ``checkpoint`` and ``restored`` messages) with the
    message of each branch summary (by position, oldest first) inserted before the client's
    message its block names."""
    out = list(forwarded)
    if not branches:
        return out
    shown = summary_count(checkpoint, kinds) if checkpoint is not None else 0
    for branch in reversed(branches):  # from the back: an insertion never moves one still to make
        at = forwarded_index(messages, head, checkpoint, branch.blocks[0].start, restored, shown)
        out.insert(at, branch_message(branch, kinds))
    return out


@dataclass(frozen=True)
class ToolPairs:
    """What a scan of messages in order leaves: the tool call ids not answered yet
    (``open_calls``), and the tool results that answered no earlier call (``orphans``)."""

    open_calls: frozenset[str] = frozenset()
    orphans: frozenset[str] = frozenset()

    @property
    def paired(self) -> bool:
        return not self.open_calls and not self.orphans

    def then(self, messages: Iterable[Message]) -> ToolPairs:
        """The scan gone on over ``messages``."""
        open_calls, orphans = set(self.open_calls), set(self.orphans)
        for message in messages:
            role = message.get("role")
            if role == ROLE_ASSISTANT:
                for call in message.get("tool_calls") or []:
                    if isinstance(call, dict) and isinstance(call.get("id"), str):
                        open_calls.add(call["id"])
            elif role == ROLE_TOOL:
                call_id = message.get("tool_call_id")
                if call_id in open_calls:
                    open_calls.discard(call_id)
                else:
                    orphans.add(str(call_id))
        return ToolPairs(frozenset(open_calls), frozenset(orphans))


def unanswered_and_orphans(messages: Sequence[Message]) -> tuple[set[str], set[str]]:
    """Tool call ids never answered, and tool results answering no earlier call."""
    pairs = ToolPairs().then(messages)
    return set(pairs.open_calls), set(pairs.orphans)


def breaks_pairing(before: ToolPairs, after: ToolPairs) -> bool:
    """Does ``after`` (a forwarded list's scan) leave a call or a result unpaired that ``before``
    (the client's list's) does not?"""
    return not (after.open_calls <= before.open_calls and after.orphans <= before.orphans)


def breaks_tool_pairs(original: Sequence[Message], forwarded: Sequence[Message]) -> bool:
    """Did assembling introduce a dangling call or an orphan result the client did not send?"""
    after = ToolPairs().then(forwarded)
    if after.paired:
        return False  # the usual case: no need to scan the whole original
    return breaks_pairing(ToolPairs().then(original), after)

"""Block kinds: what a checkpoint's blocks are, how they read as text, how a plan writing them runs.

Every ``Block`` names its kind (``Block.kind``, stored with the checkpoint). A ``BlockKind`` says,
for that name, everything the rest of ctxproxy needs to know about such blocks, so nothing
outside the strategy that writes them tests the name:

- ``render``: the summary text of a checkpoint whose blocks are all of this kind, or None for
  the common layout — ``SUMMARY_HEADER``, then each block's ``section``;
- ``messages``: the texts of the summary messages when the kind shows a checkpoint as several
  (``rounds``: one per Session Memory block, so a compression that appends a block leaves the
  earlier messages' bytes, and the provider's cache of them, as they were), else None: one
  message, ``render``'s;
- ``message_name``: the summary message's ``name`` under the ``assistant_named`` placement;
- ``summarisable``: whether the emergency plan may fold such blocks into a summary (a Contents
  Page may not: it is the index of an archive);
- ``offers_recall``: whether such blocks list archived pages the model can read back;
- ``name_tools``: the rendered text as forwarded with a request that offers ctxproxy's tools
  under these names (or not at all);
- ``executor``: how a plan whose ``block_kind`` is this one is executed (``ctxproxy.strategies
  .execution``); None: the engine summarises the plan's range (``ctxproxy.compaction.execute``);
- ``held_since``: what a stored block still holds of the messages from a point on, when a branch
  that left that point is summarised without its messages (``ctxproxy.strategies.branch``): a
  summary's text whole (it cannot be split), a Contents Page's archived pages.
- ``viewer``: how a checkpoint of this kind is forwarded in one request when that depends on
  more than its stored blocks (``ctxproxy.strategies.execution.Shown``); None: as stored.

A strategy declares the kinds it writes in its ``StrategyTraits``; the registry collects them
into ``BlockKinds``. The summary kinds below (``history``, ``turn_prefix``) are always known: the
engine's summariser writes them for every summarising strategy and for the emergency plan; so is
the branch summary's (``ctxproxy.strategies.branch``), which the registry adds. A kind nobody
declared (a checkpoint written by a strategy no longer installed) reads as history.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxproxy.strategies.base import Block, Checkpoint
from ctxproxy.strategies.execution import CheckpointViewer, PlanExecutor

SUMMARY_HEADER = "## Context Summary"
SUMMARY_NAME = "context_summary"


@dataclass(frozen=True)
class Held:
    """Something a stored block holds of an abandoned branch: ``text``, and when the text stands
    for a raw archived page, that page's Store key suffix (``ExecutionHost.page_key``)."""

    text: str
    page: str | None = None


@dataclass(frozen=True)
class BlockKind:
    """A kind of block (module docstring). Subclasses override ``render``/``section``/``name_tools``."""

    name: str
    message_name: str = SUMMARY_NAME
    summarisable: bool = True
    offers_recall: bool = False
    executor: PlanExecutor | None = None
    viewer: CheckpointViewer | None = None

    def render(self, blocks: Sequence[Block]) -> str | None:
        return None

    def messages(self, blocks: Sequence[Block]) -> list[str] | None:
        return None

    def section(self, block: Block) -> str:
        return block.text.strip()

    def name_tools(self, text: str, recall: str | None, search: str | None) -> str:
        return text

    def held_since(self, block: Block, state: Mapping[str, Any], start: int) -> list[Held]:
        """What ``block`` (of a checkpoint whose ``state`` this is) holds of the messages from
        ``start`` on: its text whole when it covers any of them (a summary cannot be split)."""
        text = self.section(block)
        return [Held(text)] if block.end > start and text else []


class TurnPrefixKind(BlockKind):
    """``cut_point``'s split turn: the start of the turn the cut falls in, summarised on its own."""

    def section(self, block: Block) -> str:
        return f"### Current turn so far\n\n{block.text.strip()}"


HISTORY = BlockKind("history")
TURN_PREFIX = TurnPrefixKind("turn_prefix")


class BlockKinds:
    """The block kinds a registry knows, by name; an unknown name reads as ``HISTORY``."""

    def __init__(self, kinds: Iterable[BlockKind] = ()) -> None:
        self._by_name = {kind.name: kind for kind in (HISTORY, TURN_PREFIX, *kinds)}

    def __getitem__(self, name: str) -> BlockKind:
        return self._by_name.get(name, HISTORY)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def of(self, blocks: Sequence[Block]) -> BlockKind:
        """The kind of a checkpoint: its blocks' when they share one, or its first block's when
        the others are split turns (the emergency plan's after blocks it may not fold), else
        ``HISTORY``."""
        names = {block.kind for block in blocks[1:]} - {TURN_PREFIX.name}
        return self[blocks[0].kind] if blocks and names <= {blocks[0].kind} else HISTORY

    def render(self, blocks: Sequence[Block]) -> str:
        """The summary text of a checkpoint with these blocks."""
        whole = self.of(blocks).render(blocks)
        if whole is not None:
            return whole
        return "\n\n".join([SUMMARY_HEADER, *(self[block.kind].section(block) for block in blocks)])

    def texts(self, blocks: Sequence[Block]) -> list[str]:
        """The texts of the summary messages of a checkpoint with these blocks: ``render``'s
        alone, unless their kind shows them as several messages."""
        return self.of(blocks).messages(blocks) or [self.render(blocks)]

    def summarisable(self, checkpoint: Checkpoint | None) -> bool:
        """Whether the emergency plan may fold ``checkpoint``'s blocks into a summary."""
        return checkpoint is None or all(self[block.kind].summarisable for block in checkpoint.blocks)

    def held_since(self, checkpoint: Checkpoint, start: int) -> list[Held]:
        """What ``checkpoint`` holds of the messages from ``start`` on, block by block."""
        return [held for b in checkpoint.blocks for held in self[b.kind].held_since(b, checkpoint.state, start)]

    def recall_blocks(self, blocks: Sequence[Block]) -> list[Block]:
        """The blocks that list archived pages the model can read back."""
        return [block for block in blocks if self[block.kind].offers_recall]

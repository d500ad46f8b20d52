"""Executing a plan of a summary kind (one whose ``BlockKind`` brings no executor of its own):
call the summariser and build the new checkpoint. No Store access here.

With ``plan.merge`` the previous checkpoint's summary and the new range become one updated
block covering ``[head, end)`` (or ``[head, turn_start)`` plus a separately summarised
``[turn_start, end)`` when the cut splits a turn). Without it the new range becomes one more
block after the existing ones. Either way the blocks tile ``[head, end)`` exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxproxy.session import PrefixChain
from ctxproxy.strategies.base import SYSTEM_ROLES, Block, Checkpoint, Message, Plan
from ctxproxy.strategies.kinds import TURN_PREFIX
from ctxproxy.summarize.base import Flavour, Summarizer, SummaryTask


def _content(messages: Sequence[Message], start: int, end: int) -> list[Message]:
    return [m for m in messages[start:end] if m.get("role") not in SYSTEM_ROLES]


async def execute_plan(
    plan: Plan,
    messages: Sequence[Message],
    chain: PrefixChain,
    head: int,
    previous: Checkpoint | None,
    summarizer: Summarizer,
    max_tokens: int,
    now: float,
) -> Checkpoint:
    if plan.max_tokens is not None:
        max_tokens = min(max_tokens, plan.max_tokens)
    files_read = tuple(plan.state.get("files_read", ()))
    files_modified = tuple(plan.state.get("files_modified", ()))
    used: list[str] = []

    async def summarize(flavour: Flavour, start: int, end: int, prior: str | None) -> str:
        result = await summarizer.summarize(
            SummaryTask(
                flavour, _content(messages, start, end), prior, max_tokens, files_read, files_modified, messages
            )
        )
        used.append(result.summarizer)
        return result.text

    if plan.merge:
        # The previous body (turn-prefix sections included) is folded in as more bullets.
        prior = "\n\n".join(b.text.strip() for b in previous.blocks) if previous is not None else None
        history_end = plan.turn_start if plan.turn_start is not None else plan.end
        blocks: list[Block] = []
        if _content(messages, plan.start, history_end):
            text = await summarize("update" if prior else "fresh", plan.start, history_end, prior)
            blocks.append(Block(head, history_end, text, plan.block_kind))
        elif previous is not None and len(previous.blocks) == 1:
            blocks.append(Block(head, history_end, previous.blocks[0].text, plan.block_kind))
        elif prior:  # several earlier blocks (history + turn prefix) and nothing new: merge them
            merged = await summarize("update", plan.start, plan.start, prior)
            blocks.append(Block(head, history_end, merged, plan.block_kind))
        if plan.turn_start is not None:
            start = blocks[-1].end if blocks else head
            blocks.append(
                Block(start, plan.end, await summarize("split_turn", plan.turn_start, plan.end, None), TURN_PREFIX.name)
            )
        if not blocks:  # the range held only system messages, which are forwarded verbatim
            blocks.append(Block(head, plan.end, "", plan.block_kind))
    else:
        existing = list(previous.blocks) if previous is not None else []
        text = await summarize("fresh", plan.start, plan.end, None)
        blocks = [*existing, Block(plan.start, plan.end, text, plan.block_kind)]

    return Checkpoint(
        end=plan.end,
        prefix_hash=chain.prefix_hash(plan.end).hex(),
        blocks=tuple(blocks),
        created_at=now,
        summarizer="extractive" if "extractive" in used else (used[0] if used else "none"),
        state=dict(plan.state),
    )

"""Branch summaries (note 003): when a conversation forks, the branch it left is summarised once
and given to the new branch at its start, so it is not simply lost.

The fork is found by ``ctxproxy.session.fork``; here are the pure plan (``plan_branch_summary``),
the block kind (``BRANCH_SUMMARY``) and its executor. A branch summary is a checkpoint of its
own whose one block, of kind ``branch_summary``, stands for none of the request's messages: it
is *inserted* before one of them.

* ``end`` / ``prefix_hash``: the messages both branches share and the new branch's first
  message. A request that repeats them is on the new branch and gets the summary, as a ``user``
  message of its own (it sits among the client's messages, where ctxproxy never speaks for the
  assistant), before message ``end − 1`` — the block's ``start``, its range empty. Its text never
  changes, so the requests that follow send the same bytes there (provider prompt caches keep
  hitting).
* ``state["tip"]``: the abandoned branch (a ``Lineage``). A request that extends it went back to
  that branch, and never gets that branch's own summary.
* ``state["owner"]``: whose branches they are (``session.fork.owner_of``, a hash; absent for a
  request that names no user or scope): only that owner's requests get it.

Where: before the first message the new branch does not share, or before its last message when
it shares all of them (a shorter history resent); moved back to before the assistant message
whose tool results would otherwise be cut from it.

What is summarised, with the branch flavour of the tenant's summariser within
``branch_summary_max_tokens``: the abandoned branch's own messages from the fork point on
(system messages left out) when this process saw them; else what the branch's newest stored
checkpoint holds from the fork point on (``BlockKinds.held_since``): a summary's text, whole,
and a Contents Page's archived pages, read back raw from the Store (a page that cannot be read
counts as its entry's lines). A branch with no answer of the model in it, or whose messages (or
stored text) come to fewer than ``branch_summary_min_tokens``, holds nothing worth keeping: no
plan.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxproxy.session.digest import PrefixChain
from ctxproxy.session.fork import Fork
from ctxproxy.session.lineage import Lineage, extends
from ctxproxy.store import StoreError
from ctxproxy.strategies.base import SYSTEM_ROLES, Block, Checkpoint, Message, Plan
from ctxproxy.strategies.boundaries import valid_cut_at_or_before
from ctxproxy.strategies.execution import ExecutionHost, PlanJob
from ctxproxy.strategies.kinds import BlockKind, Held
from ctxproxy.vocabulary import ROLE_ASSISTANT

__all__ = [
    "BRANCH_HEADER",
    "BRANCH_INTRO",
    "BRANCH_KIND",
    "BRANCH_SUMMARY",
    "BranchBudget",
    "applying",
    "branch_checkpoint",
    "execute_branch",
    "handled",
    "plan_branch_summary",
]

BRANCH_KIND = "branch_summary"
BRANCH_HEADER = "## Branch Summary"
BRANCH_INTRO = (
    "Earlier, before this point was revisited, the conversation went on differently. "
    "The user came back here and left that branch; what it held:"
)
_TIP, _OWNER = "tip", "owner"


class BranchSummaryKind(BlockKind):
    def render(self, blocks: Sequence[Block]) -> str | None:
        return "\n\n".join([BRANCH_HEADER, BRANCH_INTRO, *(block.text.strip() for block in blocks)])


@dataclass(frozen=True)
class BranchBudget:
    """``max_tokens``: a branch summary's budget; ``min_tokens``: a smaller branch is not summarised."""

    max_tokens: int
    min_tokens: int


def insertion_point(messages: Sequence[Message], point: int) -> int | None:
    """Where the summary goes in ``messages`` for a fork after ``point`` shared messages."""
    return valid_cut_at_or_before(messages, min(point, len(messages) - 1), 0)


def plan_branch_summary(
    messages: Sequence[Message],
    fork: Fork[Checkpoint],
    held: Sequence[Held],
    count: Callable[[str], int],
    budget: BranchBudget,
    owner: str | None = None,
) -> Plan | None:
    """The plan that summarises the branch ``fork`` left, or None when it holds nothing worth
    keeping (module docstring). ``held``: what its stored checkpoint holds (a fork this process
    did not see); ``count``: tokens of a text; ``owner``: the request's (``owner_of``)."""
    at = insertion_point(messages, fork.point)
    if at is None or budget.max_tokens <= 0:
        return None
    state: dict[str, Any] = {_TIP: fork.tip.to_json(), _OWNER: owner}
    if fork.seen:
        kept = [(m, t) for m, t in zip(fork.messages, fork.tokens, strict=False) if m.get("role") not in SYSTEM_ROLES]
        answered = any(m.get("role") == ROLE_ASSISTANT for m, _ in kept)
        if not answered or sum(t for _, t in kept) < budget.min_tokens:
            return None
        state["messages"] = [dict(m) for m, _ in kept]
    else:
        if sum(count(h.text) for h in held) < max(budget.min_tokens, 1):
            return None
        state["held"] = [[h.text, h.page] for h in held]
    return Plan(at, at + 1, "fork", merge=False, state=state, block_kind=BRANCH_KIND, max_tokens=budget.max_tokens)


def tip_of(checkpoint: Checkpoint) -> Lineage | None:
    """The branch a branch summary summarises."""
    return Lineage.from_json(checkpoint.state.get(_TIP))


def applying(branches: Sequence[Checkpoint], chain: PrefixChain, owner: str | None) -> list[Checkpoint]:
    """The branch summaries a request (its prefix chain and owner) gets, by position: its
    owner's, whose first ``end`` messages it repeats and whose abandoned branch it does not
    extend; one per position, the newest."""
    found: dict[int, Checkpoint] = {}
    for checkpoint in sorted(branches, key=lambda c: c.created_at):
        tip = tip_of(checkpoint)
        if checkpoint.state.get(_OWNER) != owner:
            continue
        if checkpoint.end > len(chain) or chain.prefix_hash(checkpoint.end).hex() != checkpoint.prefix_hash:
            continue
        if tip is None or extends(chain, tip) or not checkpoint.blocks:
            continue
        found[checkpoint.blocks[0].start] = checkpoint
    return [found[at] for at in sorted(found)]


def handled(applied: Sequence[Checkpoint], at: int) -> bool:
    """Whether a branch summary the request already gets stands for a fork whose summary would
    go at ``at``: one there or after it (made for this fork, or a later one of the same branch)."""
    return any(c.blocks and c.blocks[0].start >= at for c in applied)


async def execute_branch(job: PlanJob, host: ExecutionHost) -> Checkpoint:
    """Summarise the branch ``job.plan`` names into its branch summary checkpoint."""
    messages = await _abandoned(job.plan.state, host)
    text, summarizer = await host.summarize_branch(messages, job.plan.max_tokens or 0)
    return branch_checkpoint(job.plan, job.chain, text, summarizer, job.now)


def branch_checkpoint(plan: Plan, chain: PrefixChain, text: str, summarizer: str, now: float) -> Checkpoint:
    """The branch summary ``plan`` (over the request with prefix chain ``chain``) makes of
    ``text``, written by ``summarizer``; ValueError when the text says nothing."""
    if not text.strip():
        raise ValueError("the branch summary came out empty")
    return Checkpoint(
        end=plan.end,
        prefix_hash=chain.prefix_hash(plan.end).hex(),
        blocks=(Block(plan.start, plan.start, text.strip(), BRANCH_KIND),),
        created_at=now,
        summarizer=summarizer,
        state={_TIP: plan.state[_TIP], _OWNER: plan.state.get(_OWNER)},
    )


async def _abandoned(state: Mapping[str, Any], host: ExecutionHost) -> list[Message]:
    """The plan's messages, or what its stored checkpoint held: raw pages where they can be read."""
    if "messages" in state:
        return list(state["messages"])
    out: list[Message] = []
    for text, page in state.get("held", ()):
        raw = await _page(host, page) if page else None
        out.extend(raw if raw else ([{"role": ROLE_ASSISTANT, "content": text}] if text else []))
    return out


async def _page(host: ExecutionHost, page: str) -> list[Message] | None:
    try:
        stored = await host.store.get(host.page_key(page))
    except StoreError:
        return None
    messages = stored.get("messages") if isinstance(stored, dict) else None
    if not isinstance(messages, list):
        return None
    return [m for m in messages if isinstance(m, dict) and m.get("role") not in SYSTEM_ROLES] or None


BRANCH_SUMMARY = BranchSummaryKind(BRANCH_KIND, message_name=BRANCH_KIND, executor=execute_branch)

"""The emergency plan: when a prompt does not fit its window (counted before forwarding, or
reported by the upstream), cut harder than any strategy would.

With ``optimise = "cost"`` it cuts down to the low-water mark (``hysteresis.LOW_WATER`` of the
budget, counting a full summary message), so that the turns after it append for a while instead
of each needing another cut: a prompt that outgrows its window breaks the provider's prompt
cache once per many turns. With ``"tokens"``, or when that cut would not fit (a newest turn
larger than the mark), a cut point whose keep budget shrinks — half the budget, then 30 %,
15 %, 5 % — until the estimated prompt (head, covered system messages, a full summary message —
its text at the request's summary budget plus its header, role and name — and the kept
messages) fits; as a last resort everything before the newest turn is summarised. Same cut
rules as every strategy: never at a tool result, never the last message. Pure.

The estimate is an upper bound of what is forwarded (a summary is never longer than its
budget), so a plan that was meant to fit does, and planning the same request again with the
checkpoint it made finds nothing to do: no second summary, no broken prompt cache.

Never over blocks whose kind is not ``summarisable`` (``ctxproxy.strategies.kinds``): ``paged``'s
Contents Page, say — summarising it would lose the archive's index. ``paged`` archives all but
the newest page when the prompt does not fit; when that page alone is larger than the window
(an agent's turn of several large tool results), the plan summarises the start of that turn
into a block of its own after the checkpoint's (``TURN_PREFIX``, ``merge=False``, the
checkpoint's state carried), which the strategy replaces when it archives the page whole.
"""

from __future__ import annotations

from dataclasses import replace

from ctxproxy.strategies.base import Checkpoint, Conversation, Plan
from ctxproxy.strategies.boundaries import valid_cut_at_or_before
from ctxproxy.strategies.cut_point import find_cut_point, range_start
from ctxproxy.strategies.hysteresis import LOW_WATER, cut_to, share
from ctxproxy.strategies.kinds import TURN_PREFIX, BlockKinds

KEEP_FRACTIONS = (0.5, 0.3, 0.15, 0.05)
REASON = "emergency"  # the reason of every plan made here


# What appending a section to a checkpoint's summary adds besides its text: the section's header
# ("### Current turn so far") and the common summary header when the kinds are mixed.
SECTION_TOKENS = 16


def emergency_plan(conv: Conversation, checkpoint: Checkpoint | None, kinds: BlockKinds) -> Plan | None:
    start = range_start(conv, checkpoint)
    summary = conv.summary_budget
    if kinds.summarisable(checkpoint):
        plan = Plan(start, start, REASON, max_tokens=summary)
        return _cut(conv, start, share(conv, LOW_WATER), conv.summary_allowance(summary), plan)
    assert checkpoint is not None  # a missing checkpoint is summarisable
    return after_blocks(conv, checkpoint, REASON, share(conv, LOW_WATER))


def after_blocks(conv: Conversation, checkpoint: Checkpoint, reason: str, low: int) -> Plan | None:
    """The cut that fits (module docstring; ``low``: the low-water mark, in tokens) with
    ``checkpoint``'s blocks kept whole: the range from its end becomes a ``TURN_PREFIX`` block of
    its own after them, its state carried."""
    start = range_start(conv, checkpoint)
    summary = conv.summary_budget
    plan = Plan(start, start, reason, merge=False, state=dict(checkpoint.state), block_kind=TURN_PREFIX.name)
    return _cut(conv, start, low, conv.summary_tokens + summary + SECTION_TOKENS, replace(plan, max_tokens=summary))


def _cut(conv: Conversation, start: int, low: int, allowance: int, plan: Plan) -> Plan | None:
    """``plan`` ending at the cut that fits (module docstring); ``allowance``: the summary
    message(s) it forwards, at most."""
    budget = conv.window.budget
    if conv.optimise == "cost":
        cut = cut_to(conv, start, low, allowance, conv.total - 1)
        if cut is not None and conv.tokens_with_cut(cut, allowance) <= budget:
            return replace(plan, end=cut)
    for fraction in KEEP_FRACTIONS:
        cut = find_cut_point(conv, start, max(1, int(budget * fraction)))
        if cut is not None and conv.tokens_with_cut(cut, allowance) <= budget:
            return replace(plan, end=cut)
    cut = valid_cut_at_or_before(conv.messages, conv.total - 1, start)
    return None if cut is None else replace(plan, end=cut)

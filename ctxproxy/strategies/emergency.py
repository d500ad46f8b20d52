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

Not over blocks whose kind is not ``summarisable`` (``ctxproxy.strategies.kinds``): ``paged``'s
Contents Page, say — summarising it would lose the archive's index, and the ``paged`` strategy
already archives all but the newest page when the prompt does not fit.
"""

from __future__ import annotations

from ctxproxy.strategies.base import Checkpoint, Conversation, Plan
from ctxproxy.strategies.boundaries import valid_cut_at_or_before
from ctxproxy.strategies.cut_point import find_cut_point, range_start
from ctxproxy.strategies.hysteresis import LOW_WATER, cut_to, share
from ctxproxy.strategies.kinds import BlockKinds

KEEP_FRACTIONS = (0.5, 0.3, 0.15, 0.05)
REASON = "emergency"  # the reason of every plan made here


def emergency_plan(conv: Conversation, checkpoint: Checkpoint | None, kinds: BlockKinds) -> Plan | None:
    if not kinds.summarisable(checkpoint):
        return None
    start = range_start(conv, checkpoint)
    budget = conv.window.budget
    summary = conv.summary_budget
    allowance = conv.summary_allowance(summary)
    if conv.optimise == "cost":
        cut = cut_to(conv, start, share(conv, LOW_WATER), allowance, conv.total - 1)
        if cut is not None and conv.tokens_with_cut(cut, allowance) <= budget:
            return Plan(start, cut, REASON, merge=True, max_tokens=summary)
    for fraction in KEEP_FRACTIONS:
        cut = find_cut_point(conv, start, max(1, int(budget * fraction)))
        if cut is not None and conv.tokens_with_cut(cut, allowance) <= budget:
            return Plan(start, cut, REASON, merge=True, max_tokens=summary)
    cut = valid_cut_at_or_before(conv.messages, conv.total - 1, start)
    if cut is None:
        return None
    return Plan(start, cut, REASON, merge=True, max_tokens=summary)

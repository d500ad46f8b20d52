"""Fewer, larger compactions, and token defaults that fit every window. Pure.

A compaction rewrites bytes the upstream has already seen: the request that makes it pays for
its whole prompt again, at full price; the requests after it reuse the new prefix at a
fraction (providers bill a cached prefix at about a tenth). So with ``optimise = "cost"`` (the
default, ``Conversation.optimise``) strategies compact with hysteresis:

- **high water**: they compact when the prompt reaches their trigger — their note's own token
  rule, or ``HIGH_WATER`` of the budget for the rules that count tokens on behalf of a strategy
  that counts messages, rounds or pages;
- **low water**: and then far enough that the following turns only append: down to
  ``LOW_WATER`` of the budget — lower (to ``FLOOR_WATER`` of what the system messages leave, at
  least) when turns are so large (an agent's tool results in a small window) that fewer than
  ``RUN_REQUESTS`` requests would fit between it and the trigger (``low_water``; the emergency
  plan and ``paged`` keep ``LOW_WATER``) —, or whatever their note keeps, as long as that leaves
  at least ``MIN_ROOM`` of the budget below the trigger (``leaves_room``); a plan that would
  leave less waits until the prompt does not fit (the strategy's plan or the emergency plan then
  makes it fit, far enough);
- **rest**: a request right after one that compacted (``just_compacted``) does not compact
  again unless its prompt does not fit: ``ctxproxy.compaction.prepare`` does not ask the
  strategy (``rests``).

With ``optimise = "tokens"`` (an upstream without a prompt cache) each strategy's rules are its
note's as they are: compact often, keep every prompt small.

The token values the notes give assume a ~128k window (``cut_point``'s reserve of 16,384 tokens
exceeds an 8k window). Left unset, they scale with the request's budget — the window minus what
the request reserves for the answer, its tools and what ctxproxy adds — as a share of it, never
more than the note's value (``scaled``); a value the tenant configured is used as it is. A
summary's budget likewise (``summary_budget``).
"""

from __future__ import annotations

from ctxproxy.strategies.base import DEFAULT_SUMMARY_TOKENS, SYSTEM_ROLES, Checkpoint, Conversation
from ctxproxy.strategies.boundaries import valid_cut_at_or_after, valid_cut_at_or_before
from ctxproxy.vocabulary import REPLY_PRIMING_TOKENS, ROLE_ASSISTANT

HIGH_WATER = 0.9  # compact at this share of the budget (rules that count tokens for a message-counting strategy)
LOW_WATER = 0.5  # cost: compact down to this share of the budget
MIN_ROOM = 0.1  # cost: a compaction leaves at least this share of the budget below the next trigger
SUMMARY_SHARE = 0.15  # an unset summary budget: this share of the budget, at most DEFAULT_SUMMARY_TOKENS
FLOOR_WATER = 0.25  # cost: a strategy's low-water mark never goes below this share of the budget
RUN_REQUESTS = 20  # cost: a strategy's compaction leaves room for about this many requests (``low_water``)
RECENT = 24  # messages whose mean size estimates what a request adds (``growth``)
MIN_SUMMARY_TOKENS = 64
CROWDED = 0.15  # config check: less room than this share of the budget between a compaction and the next trigger


def share(conv: Conversation, ratio: float) -> int:
    """``ratio`` of the request's budget, in tokens."""
    return int(ratio * conv.window.budget)


def growth(conv: Conversation) -> float:
    """The tokens a request adds, estimated: twice the mean of the newest ``RECENT`` non-system
    messages (an answer and the next user message or tool result)."""
    recent = [
        t
        for m, t in zip(conv.messages[-RECENT:], conv.tokens[-RECENT:], strict=True)
        if m.get("role") not in SYSTEM_ROLES
    ]
    return 2 * sum(recent) / len(recent) if recent else 0.0


def low_water(conv: Conversation, ratio: float = LOW_WATER, trigger: float = HIGH_WATER) -> int:
    """A strategy's low-water mark with ``optimise = "cost"``: ``ratio`` of the budget, or lower
    (down to its system messages and ``FLOOR_WATER`` of the rest) when that would leave room
    below ``trigger`` (a share of the budget) for fewer than ``RUN_REQUESTS`` requests'
    ``growth`` — turns as large as an agent's tool results in a small window, which would
    compact every few requests. (``paged`` keeps ``LOW_WATER``: it archives whole pages.)"""
    budget = conv.window.budget
    low = ratio * budget
    if conv.optimise != "cost":
        return int(low)
    room = trigger * budget - RUN_REQUESTS * growth(conv)
    # The floor is a share of the room the conversation has besides its system messages (a
    # coding agent's can take much of the window): it always keeps some of the newest turns raw.
    system = conv.system_tokens(conv.total)  # by the system messages' positions, not a scan of the history
    floor = system + FLOOR_WATER * max(0, budget - system)
    return int(max(min(low, room), min(low, floor)))


def scaled(configured: int | None, ratio: float, cap: int, budget: int, floor: int = 1) -> int:
    """A token option: as configured, or, unset, ``ratio`` of ``budget`` — at most ``cap`` (the
    note's value), at least ``floor``."""
    if configured is not None:
        return configured
    return max(floor, min(cap, int(ratio * budget)))


def summary_budget(configured: int | None, budget: int) -> int:
    """The most a summary's text may take in a request with ``budget``: the tenant's
    ``summary_max_tokens``, or, unset, ``SUMMARY_SHARE`` of the budget, 64 to 1,200 tokens."""
    return scaled(configured, SUMMARY_SHARE, DEFAULT_SUMMARY_TOKENS, budget, MIN_SUMMARY_TOKENS)


def just_compacted(conv: Conversation, checkpoint: Checkpoint | None) -> bool:
    """``checkpoint`` was made for the request before this one, or for this one.

    The request it was made for held ``checkpoint.made_for`` messages; a client that carries on
    adds the answer to that request — one assistant message — and its next message(s). At most
    one assistant message since: no request came in between."""
    if checkpoint is None or checkpoint.made_for is None:
        return False
    answers = 0
    for i in range(checkpoint.made_for, len(conv.messages)):  # up to the second answer, not the history
        if conv.messages[i].get("role") == ROLE_ASSISTANT:
            answers += 1
            if answers > 1:
                return False
    return True


def rests(conv: Conversation, checkpoint: Checkpoint | None) -> bool:
    """Cost: the previous request compacted, so this one, which fits, does not."""
    return conv.optimise == "cost" and just_compacted(conv, checkpoint)


def leaves_room(conv: Conversation, checkpoint: Checkpoint | None, after: int, trigger: float) -> bool:
    """Whether a plan whose prompt would take ``after`` tokens is worth making now: with
    ``optimise = "cost"`` it must leave ``MIN_ROOM`` of the budget below ``trigger`` (tokens at
    which the strategy compacts again), unless the prompt does not fit as it is."""
    if conv.optimise != "cost" or conv.forwarded_tokens(checkpoint) > conv.window.budget:
        return True
    return after <= trigger - share(conv, MIN_ROOM)


def widest_cut(conv: Conversation, target: float, summary: int) -> int:
    """The smallest ``c`` (the most kept) whose prompt — system messages, a summary message of
    ``summary`` tokens in all, non-system ``messages[c:]``, the reply priming — takes at most
    ``target`` tokens (``Conversation.tokens_with_cut``); ``conv.total`` when not even the newest
    message fits. System messages are forwarded verbatim wherever they are, so they cost the same
    for every cut."""
    system = conv.system_tokens(conv.total)
    room = target - system - summary - REPLY_PRIMING_TOKENS
    cut = conv.total
    for i in range(conv.total - 1, -1, -1):
        if conv.messages[i].get("role") not in SYSTEM_ROLES:
            room -= conv.tokens[i]
        if room < 0:
            break
        cut = i
    return cut


def cut_to(conv: Conversation, start: int, target: float, summary: int, latest: int) -> int | None:
    """The valid cut ``c`` (``start < c ≤ latest``) nearest ``widest_cut``: at or after it (less
    kept, the target holds) where there is one, else before it (more kept); None when none."""
    if latest <= start:
        return None
    aim = min(max(widest_cut(conv, target, summary), start + 1), latest)
    forward = valid_cut_at_or_after(conv.messages, aim, latest + 1)
    return forward if forward is not None else valid_cut_at_or_before(conv.messages, aim, start)


def crowded(conv: Conversation, trigger: float, after: float) -> bool:
    """A strategy that compacts at ``trigger`` tokens down to ``after`` leaves so little room
    between the two that it would compact every turn or two (``StrategyOptions.crowding``)."""
    return trigger - after < CROWDED * conv.window.budget

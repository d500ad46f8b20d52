"""Deciding what to do with one request's messages: ``prepare_compaction``. Pure.

From the conversation (messages, per-message tokens, head, window, and the tokens of the newest
matching checkpoint's summary message), that checkpoint, and how the tenant compacts
(``Planning``: its strategy with its options, the block kinds, the summary budget), it returns a
frozen ``Preparation``: the checkpoint to forward with and the plan to execute now, if any — the
strategy's own, or the emergency plan when the prompt would not fit without one. The caller does
the I/O: it loads the checkpoint, executes the plan (single flight, ``ctxproxy.compaction
.single_flight``) and assembles what is forwarded.

After a strategy's plan ran, ``top_up`` says whether the prompt still needs the emergency plan (a
strategy that counts messages can compact and still not fit); ``compact_inline`` strings the two
together around an injected ``run``, for the engine and for the invariant tests alike, so that
the same request prepared again with what it made plans nothing.

With ``[compaction] optimise = "cost"`` a request right after one that compacted does not ask
its strategy at all while its prompt fits (``ctxproxy.strategies.hysteresis.rests``): no two
consecutive requests of a session compact unless the second would otherwise not fit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from ctxproxy.compaction.observer import CompactionKind
from ctxproxy.config.models import CompactionConfig
from ctxproxy.strategies.base import Checkpoint, Conversation, Plan, Strategy
from ctxproxy.strategies.emergency import REASON as EMERGENCY
from ctxproxy.strategies.emergency import emergency_plan
from ctxproxy.strategies.hysteresis import rests
from ctxproxy.strategies.kinds import BlockKinds
from ctxproxy.strategies.registry import StrategyRegistry
from ctxproxy.strategies.traits import traits_of


@dataclass(frozen=True)
class Planning:
    """How a tenant compacts. ``strategy``: its strategy, built with its options (None: the
    emergency plan alone). ``always``: the emergency plan whether or not the prompt fits (after
    an upstream overflow). ``recovery``: planning after an upstream overflow. (What the tenant
    optimises and its summary budget come with each request's ``Conversation``.)"""

    strategy: Strategy | None
    kinds: BlockKinds
    always: bool = False
    recovery: bool = False

    @classmethod
    def of(cls, registry: StrategyRegistry, config: CompactionConfig) -> Planning:
        """The tenant's own planning: its strategy, then the emergency plan when needed."""
        strategy = registry.build(config.strategy, config.options[config.strategy])
        return cls(strategy, registry.kinds)

    @classmethod
    def for_overflow(cls, registry: StrategyRegistry, config: CompactionConfig) -> Planning:
        """After the upstream refused a prompt as too long: the strategy's own plan when it
        replans on overflow (``StrategyTraits.replans_on_overflow``), else the emergency plan."""
        if traits_of(registry[config.strategy]).replans_on_overflow:
            return replace(cls.of(registry, config), recovery=True)
        return cls(None, registry.kinds, always=True, recovery=True)

    def kind_of(self, plan: Plan) -> CompactionKind:
        """Why ``plan``, made by this planning, runs (``ctxproxy.compaction.observer``)."""
        if self.recovery:
            return "recovery"
        return "emergency" if plan.reason == EMERGENCY else "planned"

    @property
    def compacts_only_to_fit(self) -> bool:
        return self.strategy is not None and traits_of(self.strategy).compacts_only_to_fit

    @property
    def summarises_branches(self) -> bool:
        return self.strategy is not None and traits_of(self.strategy).summarises_branches


@dataclass(frozen=True)
class Preparation:
    """``checkpoint``: forward with it, unless ``plan`` makes a newer one. ``fits``: the prompt
    forwarded with ``checkpoint`` fits the window (so the plan may run in the background)."""

    checkpoint: Checkpoint | None
    plan: Plan | None
    fits: bool


def plan_compaction(conv: Conversation, checkpoint: Checkpoint | None, planning: Planning, now: float) -> Plan | None:
    """The strategy's plan — unless the previous request compacted and this prompt fits (cost,
    ``rests``) —; else the emergency plan when the prompt would not fit (or always)."""
    fits = conv.forwarded_tokens(checkpoint) <= conv.window.budget
    plan = None
    if planning.strategy is not None and not (fits and rests(conv, checkpoint)):
        plan = planning.strategy.plan(conv, checkpoint, now)
    if plan is None and (planning.always or not fits):
        plan = emergency_plan(conv, checkpoint, planning.kinds)
    return plan


def prepare_compaction(
    conv: Conversation, checkpoint: Checkpoint | None, planning: Planning, now: float
) -> Preparation:
    """What to forward ``conv`` with and what to compact first (module docstring).

    A strategy that compacts only to fit forwards the client's messages as they are whenever
    they fit, even when ``checkpoint`` would match."""
    if planning.compacts_only_to_fit and conv.forwarded_tokens(None) <= conv.window.budget:
        return Preparation(None, None, True)
    fits = conv.forwarded_tokens(checkpoint) <= conv.window.budget
    return Preparation(checkpoint, plan_compaction(conv, checkpoint, planning, now), fits)


def top_up(conv: Conversation, made: Checkpoint, planning: Planning) -> Plan | None:
    """The emergency plan over ``made`` when the prompt forwarded with it still does not fit
    (``conv`` as seen with ``made``); None when it fits."""
    if conv.forwarded_tokens(made) <= conv.window.budget:
        return None
    return emergency_plan(conv, made, planning.kinds)


@dataclass(frozen=True)
class Compacted:
    """What ``compact_inline`` forwards with: ``checkpoint``, ``conv`` as seen with it, and
    whether this request made it (``by_us``)."""

    checkpoint: Checkpoint | None
    conv: Conversation
    by_us: bool


# run(plan, current, wait): the new checkpoint (None: failed) and whether this call made it;
# ``wait``: the prompt does not fit without it, so wait for a compaction already under way.
Run = Callable[[Plan, Checkpoint | None, bool], Awaitable[tuple[Checkpoint | None, bool]]]


async def compact_inline(
    plan: Plan,
    prepared: Preparation,
    planning: Planning,
    conversation: Callable[[Checkpoint | None], Conversation],
    run: Run,
) -> Compacted:
    """Run ``plan`` now, then the emergency top-up while the prompt still does not fit (``Run``);
    ``conversation(checkpoint)``: the request's conversation as seen with ``checkpoint``.

    What it returns is final: the prompt fits with it, or the emergency plan has nothing left to
    fold, so the same request prepared again with it plans nothing (no second summary, and the
    prompt cache holds). The emergency plan's estimate is an upper bound, so one top-up does;
    a summary longer than its budget (a summariser counting with another encoding, say) costs
    another, not an overflow. Each top-up starts where the last one ended: the loop ends."""
    current = prepared.checkpoint
    made, by_us = await run(plan, current, not prepared.fits)
    if made is None:
        return Compacted(current, conversation(current), False)
    conv = conversation(made)
    while (again := top_up(conv, made, planning)) is not None:
        more, _ = await run(again, made, True)
        if more is None or more.end <= made.end:
            break  # failed, or nothing newer came of it: forward with what we have
        made, conv = more, conversation(more)
    return Compacted(made, conv, by_us)

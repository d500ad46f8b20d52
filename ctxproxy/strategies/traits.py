"""What a strategy declares besides its plan: its block kinds and how the engine treats it.

A strategy class may set ``traits = StrategyTraits(...)``; one that does not gets the defaults
(it writes summary blocks only, forwards with its newest matching checkpoint, and is helped by
the emergency plan after an upstream overflow). The engine reads these through ``traits_of``
and never asks for a strategy by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxproxy.strategies.base import Strategy
from ctxproxy.strategies.kinds import BlockKind


@dataclass(frozen=True)
class StrategyTraits:
    """``block_kinds``: the kinds the strategy's plans write beyond the summary kinds
    (``ctxproxy.strategies.kinds``), each with its renderer and, if it has one, its executor.

    ``compacts_only_to_fit``: the strategy promises the client's own bytes whenever the prompt
    fits. It never plans a summary itself; the emergency plan compacts for it when a prompt does
    not fit, and its checkpoints are used only then: a request that fits the window (as far as
    the upstream's refusals tell) is forwarded as the client sent it, even when the session has
    a checkpoint that would match. Other strategies forward with their newest matching
    checkpoint, always.

    ``replans_on_overflow``: after the upstream refused a prompt as too long, the strategy's own
    plan, on the smaller window, compacts harder (``paged`` archives more pages: its Contents
    Page must survive); otherwise the emergency plan summarises.

    ``summarises_branches``: when a conversation forks, the branch it left is summarised once and
    given to the new branch (note 003, ``ctxproxy.strategies.branch``). A strategy that promises
    the client's own bytes (``none``) turns that off.

    ``memory_by_default``: the note the strategy comes from ships long-term memory with it, so a
    tenant that does not set ``[memory] enabled`` gets memory on (the config loader fills it in).
    ``layered_memory``: likewise for ``[memory] layered`` — note 002's layered memory (User and
    Scope Memory extracted after every round and sent first, each in its own block; the
    session's memory written only at compression).
    """

    block_kinds: tuple[BlockKind, ...] = ()
    compacts_only_to_fit: bool = False
    replans_on_overflow: bool = False
    summarises_branches: bool = True
    memory_by_default: bool = False
    layered_memory: bool = False


def traits_of(strategy: type[Strategy] | Strategy) -> StrategyTraits:
    traits = getattr(strategy, "traits", None)
    return traits if isinstance(traits, StrategyTraits) else StrategyTraits()

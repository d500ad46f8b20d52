"""What a plugin provides, and what its hooks are told and may answer (note 003's extensions).

A plugin is an installed Python distribution that declares entry points in these groups::

    ctxproxy.strategies   name = "pkg.module:StrategyClass"   [compaction] strategy = "name"
    ctxproxy.summarizers  name = "pkg.module:SummarizerClass" [compaction] summarizer = "name"
    ctxproxy.hooks        name = "pkg.module:HooksClass"      called at compaction and fork events

An entry point's name is the plugin's name: what ``[plugins] enabled`` lists, what logs say,
and, for a strategy or a summariser, what a tenant's ``[compaction]`` names. A class a summariser
or hooks entry point names is instantiated once, with no arguments, when the proxy starts; any
other object is used as it is. A strategy entry point names the strategy class itself
(``ctxproxy.strategies.base.Strategy``: ``name`` equal to the entry point's, ``options_model``,
``plan``, optionally ``traits``).

A summariser has a ``summarize(task: SummaryTask) -> SummaryResult`` coroutine
(``ctxproxy.summarize.base``); one instance serves every tenant and request, concurrently.

A hooks object has any of the methods below (coroutines, or plain functions, which run in a
worker thread), each called with one frozen event:

- ``before_compact(CompactEvent)``: before a plan is executed. Returns None (go on), ``Veto()``
  (no checkpoint is made; the request is forwarded with the checkpoint it had — also when the
  prompt needed the compaction to fit, so the upstream's refusal then reaches the client), or
  ``UseSummary(text)``: the summary body to store instead of the summariser's (used for plans
  the engine summarises; a block kind with an executor of its own, ``paged``'s Contents Page,
  honours only a veto; a text longer than ``event.max_tokens`` is not used).
- ``after_compact(CompactedEvent)``: a checkpoint was made. Observe only: the answer is ignored.
- ``before_fork(ForkEvent)``: a request left the branch its session was on
  (``ctxproxy.session.fork``), once per fork in a process. Returns None (go on), ``Veto()`` (no
  branch summary of the branch left is made) or ``UseSummary(text)``: the branch summary's body
  instead of the summariser's (used when ctxproxy makes one for this fork, ``event.max_tokens``
  above 0, and the text is within it).

Every call has a deadline (``[plugins] hook_timeout``); a hook that raises, times out or answers
something else is logged (plugin, hook, error type; never a message) and ignored: its veto or
summary does not count, and the request goes on as if it had answered None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ctxproxy.strategies.base import Message

STRATEGIES = "ctxproxy.strategies"
SUMMARIZERS = "ctxproxy.summarizers"
HOOKS = "ctxproxy.hooks"
GROUPS = (STRATEGIES, SUMMARIZERS, HOOKS)

HookName = Literal["before_compact", "after_compact", "before_fork"]
HOOK_NAMES: tuple[HookName, ...] = ("before_compact", "after_compact", "before_fork")


@dataclass(frozen=True)
class CompactionEvent:
    """What both compaction events say: ``tenant``'s session ``session``, whose ``strategy``
    planned (for ``reason``) to summarise messages ``[start, end)`` of the request; the checkpoint
    covers its first ``end`` messages."""

    tenant: str
    session: str
    strategy: str
    reason: str
    start: int
    end: int


@dataclass(frozen=True)
class CompactEvent(CompactionEvent):
    """Before the plan is executed: ``messages`` (a copy of ``[start, end)``) are to be summarised
    into blocks of ``kind`` on top of the session's summary so far (``previous``, rendered, or
    None). ``max_tokens``: the longest summary body this plan allows."""

    kind: str
    messages: Sequence[Message]
    previous: str | None
    max_tokens: int


@dataclass(frozen=True)
class CompactedEvent(CompactionEvent):
    """A checkpoint was made: its summary text is ``summary_chars`` characters long, written by
    ``summarizer``; ``saved``: whether the Store kept it."""

    summary_chars: int
    summarizer: str
    saved: bool


@dataclass(frozen=True)
class ForkEvent:
    """``tenant``'s session ``session`` forked: a request of ``messages`` messages shares only its
    first ``point`` with the branch the session was on (at least those, when the fork was seen
    through the checkpoints only). ``branch``: the branch left, from ``point`` on (a copy), when
    this process saw it; else empty. Of the session's checkpoints, the request no longer begins
    with the one ending at ``abandoned_end`` (the branch left's newest, whose summary is
    ``abandoned_summary``; None when that branch was not compacted past the fork), and still
    begins with the one ending at ``kept_end``, if any. ``max_tokens``: the longest branch
    summary a ``UseSummary`` may give; 0 when ctxproxy makes none of this fork (the branch holds
    nothing worth keeping, it has one already, or the tenant's strategy or
    ``branch_summary_max_tokens = 0`` turns them off)."""

    tenant: str
    session: str
    messages: int
    abandoned_end: int | None
    abandoned_summary: str | None
    kept_end: int | None
    point: int
    branch: Sequence[Message]
    max_tokens: int


@dataclass(frozen=True)
class Veto:
    """``before_compact``'s answer: make no checkpoint now; ``before_fork``'s: make no branch summary."""


@dataclass(frozen=True)
class UseSummary:
    """``before_compact``'s answer: store ``text`` as the summary body of what the plan covers;
    ``before_fork``'s: as the branch summary's body."""

    text: str


Decision = Veto | UseSummary

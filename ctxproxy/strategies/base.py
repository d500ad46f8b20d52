"""What every compaction strategy sees and returns. Pure data.

No I/O in this package except in a block kind's executor (``ctxproxy.strategies.execution``),
which does it through the host the engine lends it.

A request's ``messages`` are split into three parts::

    [head: leading system/developer messages]  [covered: summarised]  [kept: raw]
     0 .. head-1                                 head .. end-1          end .. n-1

The head is never summarised. A ``Checkpoint`` says "the first ``end`` messages, whose chain
hash is ``prefix_hash``, are represented by ``blocks``"; each ``Block`` is a summary of the
non-system messages of ``[start, end)`` and the blocks tile ``[head, end)`` exactly, so a
summary always covers exactly what was removed. System or developer messages inside the
covered range are not summarised either: they are forwarded verbatim after the head.

A strategy's ``plan`` looks at the conversation and the checkpoint that matches it and returns
a ``Plan`` (or ``None``: forward with the checkpoint as it is). Executing the plan — calling a
summariser, saving the new checkpoint — happens elsewhere (``ctxproxy.compaction``). What a
block of each kind means (``Block.kind``, ``Plan.block_kind``) is the business of the strategy
that writes it (``ctxproxy.strategies.kinds``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, ClassVar, Literal, Protocol, TypeVar, cast

from pydantic import BaseModel, ConfigDict

from ctxproxy.session.lineage import Lineage
from ctxproxy.vocabulary import REPLY_PRIMING_TOKENS, prompt_tokens
from ctxproxy.vocabulary import SYSTEM_ROLES as SYSTEM_ROLES

Message = Mapping[str, Any]
T = TypeVar("T")
# What a tenant's compaction saves (``[compaction] optimise``, ``ctxproxy.strategies.hysteresis``):
# "cost", the money of a provider that bills a cached prefix at a fraction (compact rarely and far);
# "tokens", the prompt's size at an upstream without a prompt cache (the notes' rules as they are).
Optimise = Literal["cost", "tokens"]
DEFAULT_SUMMARY_TOKENS = 1200  # a summary's budget when neither the tenant nor the window says less


@dataclass(frozen=True)
class RequestOverride:
    """A request header that sets one option, a whole number from ``minimum`` to ``maximum``,
    for that request alone (``ctxproxy.strategies.overrides``)."""

    header: str
    option: str
    minimum: int
    maximum: int


class StrategyOptions(BaseModel):
    """Base of every strategy's options: frozen, unknown keys rejected.

    ``archives_pages``: the strategy keeps archived pages a request can read back (so ctxproxy
    may offer ``recall_page``); a strategy that does sets it on its options model.
    ``request_overrides``: the options a request may set for itself through a header."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    archives_pages: ClassVar[bool] = False
    request_overrides: ClassVar[tuple[RequestOverride, ...]] = ()

    def crowding(self, blank: Conversation) -> str | None:
        """Why these options would compact on (nearly) every turn of a conversation in ``blank``'s
        window (a request without messages: its window, what the tenant optimises, its summary
        budget), saying what to change; None when they leave room. ``ctxproxy config check``
        warns with it. The base knows nothing to say."""
        return None


@dataclass(frozen=True)
class Window:
    """The model's context window and what this request reserves for the answer."""

    context_window: int
    reserve_output: int = 0  # the request's max_tokens / max_completion_tokens

    @property
    def budget(self) -> int:
        """Tokens the prompt may use."""
        return max(0, self.context_window - self.reserve_output)


@dataclass(frozen=True)
class Block:
    start: int
    end: int
    text: str
    kind: str = "history"  # a block kind's name (``ctxproxy.strategies.kinds``)

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "text": self.text, "kind": self.kind}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Block:
        return cls(int(data["start"]), int(data["end"]), str(data["text"]), str(data.get("kind", "history")))


@dataclass(frozen=True)
class Checkpoint:
    end: int
    prefix_hash: str  # hex chain hash of messages[:end]
    blocks: tuple[Block, ...]
    created_at: float
    summarizer: str = "extractive"
    state: Mapping[str, Any] = field(default_factory=dict)  # strategy-specific, JSON-serialisable
    # The checkpoint this one was made over, when there was one: the request that made it extended
    # that one, so the two lie on one branch (``ctxproxy.session.fork`` walks these links).
    base: Lineage | None = None
    # How many messages the request it was made for held (``ctxproxy.strategies.hysteresis``
    # tells from it whether the previous request compacted); None when not recorded.
    made_for: int | None = None
    # What ``decoded`` read from ``state``, by reader: the state never changes, so it is read once.
    _decoded: dict[Callable[[Mapping[str, Any]], Any], Any] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    def decoded(self, read: Callable[[Mapping[str, Any]], T]) -> T:
        """``read(self.state)``, read once per checkpoint (a strategy's index of what it keeps
        there, which several steps of one request consult)."""
        if read not in self._decoded:
            self._decoded[read] = read(self.state)
        return cast(T, self._decoded[read])

    def known_as(self, read: Callable[[Mapping[str, Any]], T], value: T) -> None:
        """Record ``value`` as what ``read(self.state)`` gives, when its maker has it at hand."""
        self._decoded[read] = value

    def linked(self, made_for: int | None, base: Lineage | None) -> Checkpoint:
        """This checkpoint with ``made_for`` and ``base`` set, keeping what was decoded from its
        state (the same state): the next requests read it without decoding it again."""
        kept = replace(self, made_for=made_for, base=base)
        kept._decoded.update(self._decoded)
        return kept

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "end": self.end,
            "prefix_hash": self.prefix_hash,
            "blocks": [b.to_json() for b in self.blocks],
            "created_at": self.created_at,
            "summarizer": self.summarizer,
            "state": dict(self.state),
        }
        if self.base is not None:
            data["base"] = self.base.to_json()
        if self.made_for is not None:
            data["made_for"] = self.made_for
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Checkpoint:
        return cls(
            end=int(data["end"]),
            prefix_hash=str(data["prefix_hash"]),
            blocks=tuple(Block.from_json(b) for b in data["blocks"]),
            created_at=float(data["created_at"]),
            summarizer=str(data.get("summarizer", "extractive")),
            state=dict(data.get("state") or {}),
            base=Lineage.from_json(data.get("base")),
            made_for=_count_or_none(data.get("made_for")),
        )


def _count_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def system_positions(messages: Sequence[Message], start: int = 0) -> tuple[int, ...]:
    """The indices of the system (and developer) messages of ``messages[start:]``."""
    return tuple(i for i in range(start, len(messages)) if messages[i].get("role") in SYSTEM_ROLES)


def systems_between(systems: Sequence[int], start: int, end: int) -> Sequence[int]:
    """Of ``systems`` (ascending indices), those in ``[start, end)``."""
    return systems[bisect_left(systems, start) : bisect_left(systems, end)]


@dataclass(frozen=True)
class Conversation:
    """One request's messages as a strategy sees them."""

    messages: Sequence[Message]
    tokens: Sequence[int]  # per message, same order
    head: int  # number of leading system/developer messages
    window: Window
    summary_tokens: int = 0  # tokens of the current checkpoint's rendered summary message(s)
    # What a summary message costs besides its text (its header, role, name and per-message
    # tokens): a plan that allows its summary ``n`` tokens adds ``n + summary_overhead``.
    summary_overhead: int = 0
    # How the tenant compacts this request: what it saves (``Optimise``), and the most a summary's
    # text may take (its ``summary_max_tokens``, or a share of this window's budget when unset).
    optimise: Optimise = "cost"
    summary_budget: int = DEFAULT_SUMMARY_TOKENS
    # Where the system messages are (``system_positions``), when the caller keeps them as the
    # conversation grows (``ctxproxy.session.known``); found here once otherwise.
    system_at: Sequence[int] | None = None
    # ``prompt_tokens(tokens)``, when the caller has summed them already (a sum over the history).
    prompt: int | None = None

    @cached_property
    def _systems(self) -> Sequence[int]:
        return self.system_at if self.system_at is not None else system_positions(self.messages)

    def system_tokens(self, end: int) -> int:
        """Tokens of the system messages of ``messages[:end]``."""
        systems, tokens = self._systems, self.tokens
        return sum(tokens[i] for i in systems[: bisect_left(systems, end)])

    @property
    def total(self) -> int:
        return len(self.messages)

    def tokens_between(self, start: int, end: int) -> int:
        return sum(self.tokens[start:end])

    def forwarded_tokens(self, checkpoint: Checkpoint | None) -> int:
        """Prompt size if forwarded with ``checkpoint`` (head + summary + kept, plus priming)."""
        if checkpoint is None:
            return self.prompt if self.prompt is not None else prompt_tokens(self.tokens)
        return self.tokens_with_cut(checkpoint.end, self.summary_tokens)

    def summary_allowance(self, text_tokens: int) -> int:
        """What a summary message whose text takes at most ``text_tokens`` adds to the prompt."""
        return text_tokens + self.summary_overhead

    def tokens_with_cut(self, end: int, summary_tokens: int) -> int:
        """Prompt size if ``messages[:end]`` were replaced by a summary of ``summary_tokens``:
        every system message up to ``end`` (the head and covered ones, forwarded verbatim), the
        summary, the kept messages, and 3 tokens of reply priming."""
        return self.system_tokens(end) + summary_tokens + self.tokens_between(end, self.total) + REPLY_PRIMING_TOKENS


@dataclass(frozen=True)
class Plan:
    """Summarise ``messages[start:end]`` into the checkpoint that will cover ``[head, end)``.

    ``merge``: fold the previous checkpoint's blocks and the new range into one rolling block
    (the previous summary is *updated*, never stacked). Otherwise the new range becomes one
    more block after the existing ones (``rounds``' Session Memory blocks).
    ``turn_start``: the cut falls inside a turn that began at ``turn_start``; the turn's start
    ``[turn_start, end)`` is summarised separately and attached (``cut_point``).
    ``block_kind`` labels what is written; ``max_tokens`` caps this plan's summary below the
    tenant's ``summary_max_tokens`` (a block about three short rounds should stay short).
    """

    start: int
    end: int
    reason: str
    merge: bool = True
    turn_start: int | None = None
    state: Mapping[str, Any] = field(default_factory=dict)
    block_kind: str = "history"  # the kind of the block(s) this plan writes, which says how it is executed
    max_tokens: int | None = None  # a tighter summary budget than the tenant's, if any


class Strategy(Protocol):
    """A strategy class. Besides these members it may set the class attribute ``traits`` (a
    ``ctxproxy.strategies.traits.StrategyTraits``: its block kinds and how the engine treats it)."""

    name: ClassVar[str]
    options_model: ClassVar[type[StrategyOptions]]

    def __init__(self, options: StrategyOptions) -> None: ...

    def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None: ...

"""``paged`` (note 004): pages of one interaction each; the newest stay raw, older ones are archived.

A *page* is one interaction: a user message and the assistant / tool messages that answer it, up
to the next user message. Pages are numbered 1.. by the user message's ordinal in the request, so
a page keeps its number for the whole conversation; messages between the head and the first user
message (an assistant greeting) join page 1. System messages inside the history stay inside
their page's range (``assemble`` forwards covered system messages verbatim anyway).

Archiving replaces the archived pages by the **Contents Page**, one message listing every
archived page with a one-line summary and one line per entry (``contents``); the raw pages go
to the Store and the model reads one back with the recall tool. The checkpoint of a paged
conversation therefore has exactly one block, of kind ``"contents"`` (``kind.CONTENTS_PAGE``),
tiling ``[head, end)``.

When (``PagedStrategy.plan``), with *unarchived* the pages that start at or after the current
checkpoint's end, the newest (in-progress) page included:

- **count**: unarchived pages ≥ ``active_pages + archive_batch`` → archive all but the newest
  ``active_pages``. Between two archivals the raw window grows from ``active_pages`` to
  ``active_pages + archive_batch − 1`` pages and the prompt prefix (head, Contents Page, raw pages)
  stays byte-identical, so provider prompt caches keep hitting;
- **pressure**: the prompt as forwarded now would not fit ``conv.window.budget`` → also archive
  the oldest unarchived pages until the estimate fits (the Contents Page's growth estimated
  conservatively, see ``contents_growth``), or all but the newest page when nothing fits. With
  ``optimise = "cost"`` (hysteresis) it fires earlier and goes further: when the prompt reaches
  ``hysteresis.HIGH_WATER`` of the budget, down to ``hysteresis.LOW_WATER`` of it (pages are archived
  whole, so a mark lowered for large turns would archive a large page a turn early), so the turns
  after it append instead of each archiving one more page — unless that would leave no room
  before the next (``hysteresis.leaves_room``) while the prompt fits.

``archive_batch`` and ``contents_max_tokens`` unset depend on ``optimise`` and the request's
budget (``PagedOptions.batch``, ``contents_budget``); the plan carries the Contents Page's budget
to the archive step (``state["contents_max_tokens"]``).

Either way the newest page always stays raw and a page is never split: the plan's ``end`` is the
first message of a page — a user message — so a tool call always stays with its results and the
last message is never covered.

- **split**: except when the newest page alone reaches the trigger (an agent's turn of several
  large tool results in a small window; it used to be forwarded over the window): its start, up
  to a valid cut, is summarised into a block after the Contents Page (``emergency.after_blocks``,
  down to the low-water mark), which stays byte for byte; the checkpoint still reads as a paged
  one (``is_paged_checkpoint``) whose pages end where its Contents Page does, and the next
  archival archives that page whole and drops the block. A checkpoint that is not a paged one (another strategy's, the
tenant switched) or that does not end on a page boundary is replaced: its range is archived as
pages again, from the head.

Plan: ``start`` = where the raw history begins, ``end`` = the first kept message,
``merge=False``, ``block_kind="contents"``, ``state = {"turn": <user messages in the request>,
"archive": [[page, start, end], ...], "contents_max_tokens": <budget>}``; the kind's executor
(``archive_io``, around the pure ``archive``) does the rest. A split's plan (reason
``SPLIT_REASON``) is a summary's: ``start`` = the checkpoint's end, ``merge=False``,
``block_kind="turn_prefix"``, the checkpoint's state carried (``emergency.after_blocks``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, NamedTuple

from ctxproxy.strategies.base import SYSTEM_ROLES, Checkpoint, Conversation, Message, Plan, StrategyOptions
from ctxproxy.strategies.emergency import after_blocks
from ctxproxy.strategies.hysteresis import HIGH_WATER, LOW_WATER, leaves_room, share
from ctxproxy.strategies.paged.base import (
    CONTENTS_KIND,
    LINE_MAX_CHARS,
    MAX_LINES_PER_PAGE,
    PagedOptions,
    contents_end,
    is_paged_checkpoint,
)
from ctxproxy.strategies.paged.entries import archive_index
from ctxproxy.strategies.paged.kind import CONTENTS_PAGE
from ctxproxy.strategies.traits import StrategyTraits
from ctxproxy.vocabulary import REPLY_PRIMING_TOKENS, ROLE_USER

SPLIT_REASON = "page too large"  # the plan's reason when the newest page alone reaches the trigger
# Tokens of one Contents Page line, at most: a CJK character can cost a token or more, so a
# full line is counted as LINE_MAX_CHARS tokens plus the indent and newline.
_LINE_TOKENS = LINE_MAX_CHARS + 4
# The Contents Page's header, instruction sentence and message framing.
CONTENTS_OVERHEAD_TOKENS = 90


class PageSpan(NamedTuple):
    """Page ``page`` is ``messages[start:end]``."""

    page: int
    start: int
    end: int


def split_pages(messages: Sequence[Message], head: int) -> list[PageSpan]:
    """The pages of ``messages[head:]``, oldest first; they tile ``[head, len(messages))``.

    Page ``i`` opens with the ``i``-th user message; whatever precedes the first user message
    belongs to page 1 (a history without any user message is one page 1).
    """
    total = len(messages)
    if head >= total:
        return []
    starts = [i for i in range(head, total) if messages[i].get("role") == ROLE_USER]
    if not starts or starts[0] != head:
        starts = [head, *starts[1:]] if starts else [head]
    return _spans(starts, total, 1)


def _spans(starts: Sequence[int], total: int, number: int) -> list[PageSpan]:
    """The pages opening at ``starts`` (ascending), the last ending at ``total``, numbered from ``number``."""
    ends = [*starts[1:], total]
    return [PageSpan(n, start, end) for n, (start, end) in enumerate(zip(starts, ends, strict=True), number)]


def _pages_from(messages: Sequence[Message], start: int, number: int) -> list[PageSpan]:
    """The pages of ``messages[start:]`` when page ``number`` opens with the user message at ``start``."""
    starts = [start, *(i for i in range(start + 1, len(messages)) if messages[i].get("role") == ROLE_USER)]
    return _spans(starts, len(messages), number)


def archived_end(conv: Conversation, checkpoint: Checkpoint | None, pages: Sequence[PageSpan]) -> int:
    """Where the raw history begins: a paged checkpoint's archived pages' end when it is a page
    boundary, else the head. (The start of the page after them, summarised by the emergency plan,
    is archived with that page.)"""
    if not is_paged_checkpoint(checkpoint):
        return conv.head
    assert checkpoint is not None
    end = contents_end(checkpoint)
    if end == conv.head or any(p.start == end for p in pages):
        return end
    return conv.head


def unarchived_pages(conv: Conversation, checkpoint: Checkpoint | None) -> tuple[int, list[PageSpan]]:
    """``archived_end`` and the pages from there on, oldest first. Read from there on alone when
    the checkpoint's archive index names the page that ends there (its number and the messages
    before it are the ones the archival saw: the checkpoint matched their prefix hash), so a
    request reads only its raw pages; split from the head otherwise."""
    if is_paged_checkpoint(checkpoint) and checkpoint is not None:
        end = contents_end(checkpoint)
        if conv.head < end < conv.total and conv.messages[end].get("role") == ROLE_USER:
            entries = checkpoint.decoded(archive_index).entries
            if entries and entries[-1].end == end:
                return end, _pages_from(conv.messages, end, entries[-1].page + 1)
    pages = split_pages(conv.messages, conv.head)
    start = archived_end(conv, checkpoint, pages)
    return start, [p for p in pages if p.start >= start]


def page_growth(conv: Conversation, page: PageSpan) -> int:
    """An upper bound of the tokens ``page`` adds to the Contents Page: its summary line and at
    most ``MAX_LINES_PER_PAGE`` entry lines, a line never costing more than its message."""
    costs = sorted(
        (
            min(conv.tokens[i], _LINE_TOKENS) + 4
            for i in range(page.start, page.end)
            if not _is_system(conv.messages[i])
        ),
        reverse=True,
    )
    return _LINE_TOKENS + 4 + sum(costs[:MAX_LINES_PER_PAGE])  # "[Page #i] <summary>", then the lines


def contents_growth(conv: Conversation, pages: Sequence[PageSpan]) -> int:
    return sum(page_growth(conv, page) for page in pages)


def _is_system(message: Message) -> bool:
    return message.get("role") in SYSTEM_ROLES


class PagedStrategy:
    name: ClassVar[str] = "paged"
    options_model: ClassVar[type[StrategyOptions]] = PagedOptions
    traits: ClassVar[StrategyTraits] = StrategyTraits(
        block_kinds=(CONTENTS_PAGE,), replans_on_overflow=True, memory_by_default=True
    )

    def __init__(self, options: StrategyOptions) -> None:
        if not isinstance(options, PagedOptions):
            raise TypeError(f"{self.name} needs PagedOptions, got {type(options).__name__}")
        self.options = options

    def plan(self, conv: Conversation, checkpoint: Checkpoint | None, now: float) -> Plan | None:
        start, unarchived = unarchived_pages(conv, checkpoint)
        if len(unarchived) < 2:  # the newest page always stays raw, unless it is too large
            return self._split_newest(conv, checkpoint)
        by_count = self._count_to_archive(len(unarchived), conv)
        by_pressure = self._pressure_to_archive(conv, checkpoint, unarchived, start)
        count = max(by_count, by_pressure)
        if count == 0:
            return None
        archived = unarchived[:count]
        return Plan(
            start=start,
            end=unarchived[count].start,
            reason="pages" if by_count >= by_pressure else "pressure",
            merge=False,
            block_kind=CONTENTS_KIND,
            state={
                "turn": unarchived[-1].page,  # ``turn_number``: the newest page's number
                "archive": [[p.page, p.start, p.end] for p in archived],
                "contents_max_tokens": self.options.contents_budget(conv.window.budget),
            },
        )

    def _split_newest(self, conv: Conversation, checkpoint: Checkpoint | None) -> Plan | None:
        """The newest page alone reaches the trigger (``_pressure_to_archive``): the start of
        it summarised after the Contents Page, down to the target (``emergency.after_blocks``);
        the page is archived whole once the next one begins."""
        if not is_paged_checkpoint(checkpoint) or checkpoint is None:
            return None
        trigger = share(conv, HIGH_WATER) if conv.optimise == "cost" else conv.window.budget + 1
        if conv.forwarded_tokens(checkpoint) < trigger:
            return None
        return after_blocks(conv, checkpoint, SPLIT_REASON, share(conv, LOW_WATER))

    def _count_to_archive(self, unarchived: int, conv: Conversation) -> int:
        active, batch = self.options.active_pages, self.options.batch(conv.optimise)
        return unarchived - active if unarchived >= active + batch else 0

    def _pressure_to_archive(
        self, conv: Conversation, checkpoint: Checkpoint | None, unarchived: Sequence[PageSpan], start: int
    ) -> int:
        """The fewest oldest pages whose archival brings the prompt to the target; all but the
        newest if none does. Tokens: fires when the prompt does not fit, aims at fitting; cost:
        fires at the high-water mark, aims at the low-water mark (module docstring)."""
        budget = conv.window.budget
        cost = conv.optimise == "cost"
        trigger, target = (share(conv, HIGH_WATER), share(conv, LOW_WATER)) if cost else (budget + 1, budget)
        if conv.forwarded_tokens(checkpoint) < trigger:
            return 0
        # A paged checkpoint's Contents Page stays and grows; another strategy's summary is replaced.
        stays = is_paged_checkpoint(checkpoint) and checkpoint is not None and contents_end(checkpoint) == start
        current = conv.summary_tokens if stays else CONTENTS_OVERHEAD_TOKENS
        cap = self.options.contents_budget(budget) + CONTENTS_OVERHEAD_TOKENS  # eviction keeps it under the budget
        # The prompt with the first ``count`` pages archived, updated page by page (one pass):
        # system messages up to the cut stay, the kept messages after it, the Contents Page.
        system = conv.system_tokens(start)
        kept = conv.tokens_between(start, conv.total)
        growth, after = 0, 0
        for count, page in enumerate(unarchived[:-1], 1):
            for i in range(page.start, page.end):
                kept -= conv.tokens[i]
                system += conv.tokens[i] if _is_system(conv.messages[i]) else 0
            growth += page_growth(conv, page)
            after = system + min(current + growth, cap) + kept + REPLY_PRIMING_TOKENS
            if after <= target:
                return count
        if not leaves_room(conv, checkpoint, after, trigger):
            return 0
        return len(unarchived) - 1


STRATEGY = PagedStrategy

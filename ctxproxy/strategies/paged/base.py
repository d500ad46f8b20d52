"""What every module of ``paged`` shares: its options, the name of its Contents Page block kind,
the bounds of a Contents Page line, what a paged checkpoint is, and a request's turn. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field, NonNegativeInt, PositiveInt

from ctxproxy.strategies.base import Checkpoint, Conversation, Message, Optimise, StrategyOptions
from ctxproxy.strategies.hysteresis import scaled
from ctxproxy.strategies.kinds import TURN_PREFIX
from ctxproxy.vocabulary import ROLE_USER

CONTENTS_KIND = "contents"
# Upper bounds of what one archived page adds to the Contents Page: at most this many entry lines,
# each at most LINE_MAX_CHARS characters (``ctxproxy.summarize.pagelines`` writes them so, and
# ``ctxproxy.strategies.paged.archive`` enforces both before rendering).
LINE_MAX_CHARS = 100
MAX_LINES_PER_PAGE = 12
NOTE_ARCHIVE_BATCH, COST_ARCHIVE_BATCH = 4, 10  # ``archive_batch`` unset, by ``optimise``
CONTENTS_TOKENS, CONTENTS_SHARE = 2000, 0.2  # ``contents_max_tokens`` unset: this share of the budget, at most 2000


class PagedOptions(StrategyOptions):
    """Options of ``paged``; eviction options are turns (user messages), not seconds.

    ``archive_batch``: each archival rewrites the Contents Page and moves the cut, so the
    provider's prompt cache misses from the Contents Page on, once. Archiving 4 pages together
    (unset, with ``optimise = "tokens"``) makes that happen on one turn in 4 (the other 3 reuse
    the whole prefix) at the price of at most 3 raw pages more than ``active_pages`` in the
    prompt; 1 would miss the cache on every turn. With ``"cost"`` (unset) 10: one miss per 10
    turns, for up to 9 raw pages more — about the cheapest when a cached token costs a tenth.

    ``contents_max_tokens`` unset: a fifth of the request's budget, at most 2000 (a 2000-token
    Contents Page would take half of a 4k window).

    ``restore_max_tokens`` = 4000: a recalled page is put back into the window (``restore``) only
    when it takes at most this many tokens — the size of the largest tool answer by default
    (``[tools] result_max_tokens``), so a page the recall tool could hand over whole is restored
    whole; a longer one stays in the archive, still readable with the recall tool. 0: recalled
    pages are never restored.
    """

    archives_pages: ClassVar[bool] = True
    active_pages: PositiveInt = 5  # newest pages kept raw after an archival
    archive_batch: PositiveInt | None = None  # pages archived together (see above, ``batch``)
    contents_max_tokens: PositiveInt | None = None  # the Contents Page's budget (``contents_budget``)
    evict_unrecalled_after: PositiveInt = 10  # m: never recalled this many turns after archiving → unlisted
    evict_idle_after: PositiveInt = 20  # p: recalled, but not for this many turns → unlisted
    evict_to_ratio: float = Field(0.8, gt=0, le=1)  # over budget: evict until at most this share of it
    restore_max_tokens: NonNegativeInt = 4000  # a recalled page larger than this is not restored (see above)

    def batch(self, optimise: Optimise) -> int:
        if self.archive_batch is not None:
            return self.archive_batch
        return NOTE_ARCHIVE_BATCH if optimise == "tokens" else COST_ARCHIVE_BATCH

    def crowding(self, blank: Conversation) -> str | None:
        if self.batch(blank.optimise) == 1:
            return "it archives a page on every turn: raise archive_batch (or leave it unset)"
        return None

    def contents_budget(self, budget: int | None) -> int:
        """The Contents Page's budget in a request whose prompt may take ``budget`` tokens (None:
        the largest, 2000 unless configured)."""
        if budget is None:
            return self.contents_max_tokens if self.contents_max_tokens is not None else CONTENTS_TOKENS
        return scaled(self.contents_max_tokens, CONTENTS_SHARE, CONTENTS_TOKENS, budget)


def is_paged_checkpoint(checkpoint: Checkpoint | None) -> bool:
    """Made by ``paged``: one Contents Page block, followed by nothing but the emergency plan's
    summaries of the start of a page too large for the window (anything else is another
    strategy's)."""
    if checkpoint is None or not checkpoint.blocks or checkpoint.blocks[0].kind != CONTENTS_KIND:
        return False
    return all(block.kind == TURN_PREFIX.name for block in checkpoint.blocks[1:])


def contents_end(checkpoint: Checkpoint) -> int:
    """Where a paged checkpoint's archived pages end: its Contents Page's end (a page boundary,
    also when the start of the page after it was summarised since)."""
    return checkpoint.blocks[0].end


def turn_number(messages: Sequence[Message]) -> int:
    """The request's turn: how many user messages it holds (1-based once the user spoke). Page
    ``i`` opens with the ``i``-th user message, so this is also the number of the newest page."""
    return sum(1 for m in messages if m.get("role") == ROLE_USER)

"""Recalled pages back in the window, and the Contents Page as one request shows it. Pure.

Note 004: a page the model recalls is "restored from the archive and inserted into the window"
(从文件系统恢复 Page，插入窗口), and the Contents Page shows each page's recall statistics, "召回次数:
2, 最后召回: 5轮前". ``plan_restoration`` says, for one request forwarded with a paged
checkpoint, which recalled pages go back into the window and what the Contents Page says; the
caller (``restore_io``) reads the recall statistics from the Store.

**Which pages.** A page the model recalled during turn ``l`` (its ``RecallStat``, last turn ``l``)
is restored from the next request on — the rest of turn ``l`` included: the client's next request
of that turn does not carry the tool answer either — for as long as the page it was recalled
during stays raw. It ages out by the active-window rule: the archival that archives page ``l``
(the newest archived page reaches ``l``; page ``i`` is the ``i``-th user message, so page ``l``
is the one turn ``l`` was about) takes it out of the window again, with the pages of its age.
Between two archivals nothing ages out, so restored pages stay byte-identical from request to
request and the provider's prompt cache keeps hitting; the archival that drops one rewrites the
Contents Page, and misses the cache from there, anyway.

**Where.** Right after the Contents Page, before the raw pages, in page order: the note's window
``[Contents Page][restored pages][active pages]``, and chronological, since every archived page
is older than every raw one. A restored page is the request's own ``messages[start:end]`` (the
checkpoint matched the request's prefix hash, so they are the archived messages byte for byte),
its system messages left out (``assemble`` forwards those verbatim already).

**What fits.** Restored pages never push the prompt over the window: they get only the room the
prompt forwarded with the checkpoint leaves (``conv.window.budget`` less what it forwards, less
what the re-rendered Contents Page adds), the most recently recalled first; one that does not fit
is left out (an older, smaller one may still fit), and so is one over ``restore_max_tokens``.
The model can still read a page left out with the recall tool.

**The statistics.** The Contents Page is rendered for ``stats_turn``: the archival's turn, or the
turn after the latest recall before this request's turn — the first turn a recall shows in, when
the prompt changes right after the Contents Page anyway (the page is restored there). So "last
recalled N turns ago" is exact on that turn and on an archival's, the page is not rewritten turn
by turn, and N lags until the next archival or recall.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ctxproxy.strategies.base import SYSTEM_ROLES, Checkpoint, Conversation
from ctxproxy.strategies.paged.base import PagedOptions, turn_number
from ctxproxy.strategies.paged.contents import ContentsEntry, RecallStat, archive_index, render_contents

__all__ = ["Restoration", "plan_restoration", "restorable", "stats_turn"]


@dataclass(frozen=True)
class Restoration:
    text: str  # the Contents Page as this request forwards it
    pages: tuple[int, ...]  # the pages restored, in page order
    messages: tuple[int, ...]  # their messages' indices in the request, in order


def stats_turn(archived_turn: int, stats: Mapping[int, RecallStat], turn: int) -> int:
    """The turn a request of ``turn`` shows the statistics at: the archival's, or the turn after
    the latest recall before ``turn`` (module docstring)."""
    after = [s.last_turn + 1 for s in stats.values() if s.count > 0 and s.last_turn < turn]
    return max([archived_turn, *after])


def restorable(entries: Sequence[ContentsEntry], stats: Mapping[int, RecallStat], turn: int) -> list[ContentsEntry]:
    """The archived pages recalled since the newest archived page was the current one, up to
    ``turn`` (a recall from a longer fork of the conversation is not this one's), the most
    recently recalled first (ties: the higher page)."""
    if not entries:
        return []
    through = max(e.page for e in entries)
    found = [
        e for e in entries if (s := stats.get(e.page)) is not None and s.count > 0 and through < s.last_turn <= turn
    ]
    return sorted(found, key=lambda e: (stats[e.page].last_turn, e.page), reverse=True)


def plan_restoration(
    conv: Conversation,
    checkpoint: Checkpoint,
    stats: Mapping[int, RecallStat],
    options: PagedOptions,
    count_text: Callable[[str], int],
) -> Restoration | None:
    """What a request forwarded with the paged ``checkpoint`` shows (module docstring); None when
    it is the stored checkpoint as it is. ``conv``: the request as seen with ``checkpoint``;
    ``stats``: the recall statistics of its pages, by page number."""
    entries = checkpoint.decoded(archive_index).entries
    if not entries or not stats or len(checkpoint.blocks) != 1:
        return None
    stored = checkpoint.blocks[0].text
    turn = turn_number(conv.messages)
    text = render_contents(entries, stats, stats_turn(_archived_turn(checkpoint), stats, turn))
    room = conv.window.budget - conv.forwarded_tokens(checkpoint)
    grown = count_text(text) - count_text(stored) if text != stored else 0
    if grown > 0 and grown > room:  # the statistics alone would not fit: the stored page (rare)
        text, grown = stored, 0
    room -= grown
    chosen: dict[int, list[int]] = {}
    for entry in restorable(entries, stats, turn):
        indices = _page_messages(conv, checkpoint, entry)
        cost = sum(conv.tokens[i] for i in indices)
        if indices and cost <= min(room, options.restore_max_tokens):
            chosen[entry.page] = indices
            room -= cost
    if text == stored and not chosen:
        return None
    pages = tuple(sorted(chosen))
    return Restoration(text, pages, tuple(i for page in pages for i in chosen[page]))


def _archived_turn(checkpoint: Checkpoint) -> int:
    turn = checkpoint.state.get("turn")
    return turn if isinstance(turn, int) and not isinstance(turn, bool) else 0


def _page_messages(conv: Conversation, checkpoint: Checkpoint, entry: ContentsEntry) -> list[int]:
    """The indices of ``entry``'s non-system messages in the request; none when its range is not
    inside the checkpoint's (a malformed state)."""
    if not conv.head <= entry.start < entry.end <= min(checkpoint.end, conv.total):
        return []
    return [i for i in range(entry.start, entry.end) if conv.messages[i].get("role") not in SYSTEM_ROLES]

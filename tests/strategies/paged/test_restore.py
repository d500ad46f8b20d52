"""Restoring recalled pages (note 004), planned: which pages go back into the window, where, for
how long, what fits, and the Contents Page's statistics as a request shows them. The checkpoints
are made by the real archival (``PagedStrategy.plan`` + ``archive_pages``)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ctxproxy.compaction.assemble import assemble, breaks_tool_pairs
from ctxproxy.strategies.base import Checkpoint
from ctxproxy.strategies.kinds import BlockKinds
from ctxproxy.strategies.paged import CONTENTS_PAGE, PagedOptions
from ctxproxy.strategies.paged.contents import RecallStat, decode_entries
from ctxproxy.strategies.paged.restore import Restoration, plan_restoration, restorable, stats_turn
from tests.strategies.factories import assistant, assistant_calls, conversation, system, tool, user
from tests.strategies.paged.deploys import archive, count, page, request

# Four pages archived at a time, two kept: archivals at turns 6 (pages 1-4) and 10 (5-8).
OPTIONS = PagedOptions(active_pages=2, archive_batch=4)
KINDS = BlockKinds([CONTENTS_PAGE])
LARGE = 1_000_000


def span(n: int) -> list[int]:
    """Page ``n``'s message indices in ``request``."""
    return list(range(1 + 4 * (n - 1), 1 + 4 * n))


def archived(turn: int, previous: Checkpoint | None = None, stats: dict[int, RecallStat] | None = None) -> Checkpoint:
    return archive(request(turn), previous, stats, OPTIONS)[1].checkpoint


def restore(
    messages: list[dict[str, Any]],
    made: Checkpoint,
    stats: dict[int, RecallStat],
    *,
    window: int = LARGE,
    tokens: int = 10,
    options: PagedOptions = OPTIONS,
) -> Restoration | None:
    conv = conversation(messages, tokens=tokens, window=window, summary_tokens=count(made.blocks[0].text))
    return plan_restoration(conv, made, stats, options, count)


def forwarded_tokens(messages: list[dict[str, Any]], made: Checkpoint, tokens: int = 10) -> int:
    return conversation(messages, tokens=tokens, summary_tokens=count(made.blocks[0].text)).forwarded_tokens(made)


def test_a_recalled_page_goes_back_right_after_the_contents_page_in_page_order() -> None:
    """Note 004: the recalled page is "restored from the archive and inserted into the window"
    (从文件系统恢复 Page，插入窗口), whose layout is [Contents Page][active pages]: restored pages go
    between the two, oldest page first, each whole (its tool calls with their results)."""
    made = archived(6)
    stats = {3: RecallStat(1, 6), 1: RecallStat(2, 6)}  # both read back during turn 6
    messages = request(7)
    planned = restore(messages, made, stats)
    assert planned is not None and planned.pages == (1, 3)
    assert list(planned.messages) == span(1) + span(3)
    shown = [messages[i] for i in planned.messages]
    forwarded = assemble(messages, 1, made, "assistant_named", KINDS, shown)
    assert forwarded[1]["name"] == "contents_page"
    assert forwarded[2:10] == [*page(1), *page(3)]
    assert forwarded[10:] == messages[made.end :]  # pages 5, 6 and the question, raw
    assert not breaks_tool_pairs(messages, forwarded)


def test_the_contents_page_says_when_each_page_was_last_recalled() -> None:
    """Note 004's statistics, "召回次数: 2, 最后召回: 5轮前" (recalled 2 times, last 5 turns ago):
    the request after a recall shows it as 1 turn ago."""
    made = archived(6)
    planned = restore(request(7), made, {3: RecallStat(2, 6)})
    assert planned is not None
    assert "[Page #3] " in planned.text and "(recalled 2×, last recalled 1 turn ago)" in planned.text
    assert planned.text.count("recalled") == 2  # page 3's entry only (and no other page's)


def test_restored_until_the_archival_of_the_page_it_was_recalled_during() -> None:
    """Note 004's active window keeps the newest n pages and archives what falls out of it. A page
    recalled during turn 6 is as old as page 6: it stays restored — byte for byte the same, with
    the same Contents Page — for turns 7, 8 and 9, and leaves at the archival of turn 10, which
    archives page 6 (pages 5-8)."""
    first = archived(6)
    stats = {2: RecallStat(1, 6)}
    shown = []
    for turn in (7, 8, 9):
        planned = restore(request(turn), first, stats)
        assert planned is not None and planned.pages == (2,)
        shown.append((planned.text, planned.messages))
    assert shown[0] == shown[1] == shown[2]
    second = archived(10, first, stats)
    assert max(e.page for e in decode_entries(second.state)) == 8
    after = restore(request(10), second, stats)
    assert after is None or after.pages == ()
    # ... and the archival's own Contents Page counts the recall at its turn.
    assert "(recalled 1×, last recalled 4 turns ago)" in second.blocks[0].text


def test_restored_while_the_page_it_was_recalled_during_is_raw() -> None:
    entries = decode_entries(archived(6).state)  # pages 1-4 archived, 5 and 6 raw
    assert [e.page for e in restorable(entries, {2: RecallStat(1, 5)}, 7)] == [2]
    assert [e.page for e in restorable(entries, {2: RecallStat(1, 4)}, 7)] == []  # as old as page 4: archived
    both = {1: RecallStat(1, 6), 2: RecallStat(5, 5), 3: RecallStat(1, 6)}
    assert [e.page for e in restorable(entries, both, 7)] == [3, 1, 2]  # most recently recalled first


def test_the_rest_of_the_recall_turn_has_the_page_too() -> None:
    """The client's next request of the same turn (its own tool results) does not carry the tool
    answer the model read the page in: the page is restored there too, "this turn"."""
    made = archived(6)
    messages = [*request(6), assistant_calls("get_weather", ids=["w1"]), tool("w1", "sunny")]
    planned = restore(messages, made, {4: RecallStat(1, 6)})
    assert planned is not None and planned.pages == (4,)
    assert "(recalled 1×, last recalled this turn)" in planned.text


def test_the_statistics_are_counted_at_the_turn_they_last_changed() -> None:
    """Rewritten on the turn after a recall (where restoring changes the prompt anyway) and at an
    archival, never turn by turn: between the two the page keeps its bytes."""
    stats = {2: RecallStat(1, 6), 3: RecallStat(3, 8)}
    assert stats_turn(6, stats, 7) == 7
    assert stats_turn(6, stats, 8) == 7  # page 3's recall during turn 8 shows from turn 9
    assert stats_turn(6, stats, 9) == 9 == stats_turn(6, stats, 12)
    assert stats_turn(10, stats, 12) == 10  # an archival after both
    assert stats_turn(6, {}, 9) == 6


def test_pages_that_do_not_fit_are_left_out_most_recently_recalled_first() -> None:
    """Restored pages never push the prompt over the window: the room the prompt leaves goes to
    the most recently recalled page first; an older one that does not fit is left out."""
    made = archived(6)
    stats = {1: RecallStat(1, 6), 3: RecallStat(1, 7)}  # page 3 recalled later
    messages = request(8)
    everything = restore(messages, made, stats)
    assert everything is not None and everything.pages == (1, 3)
    grown = count(everything.text) - count(made.blocks[0].text)
    fits_one = forwarded_tokens(messages, made) + grown + 4 * 10 + 39  # one page is 40 tokens
    one = restore(messages, made, stats, window=fits_one)
    assert one is not None and one.pages == (3,) and list(one.messages) == span(3)
    conv = conversation(messages, window=fits_one, summary_tokens=count(made.blocks[0].text))
    restored_tokens = sum(conv.tokens[i] for i in one.messages)
    assert conv.forwarded_tokens(made) + grown + restored_tokens <= conv.window.budget
    none = restore(messages, made, stats, window=fits_one - 40)
    assert none is not None and none.pages == ()  # the statistics still show, nothing restored


def test_a_page_larger_than_restore_max_tokens_stays_in_the_archive() -> None:
    made = archived(6)
    stats = {2: RecallStat(1, 6)}
    cap = PagedOptions(active_pages=2, archive_batch=4, restore_max_tokens=79)
    assert restore(request(7), made, stats, tokens=20, options=cap).pages == ()  # type: ignore[union-attr]
    assert restore(request(7), made, stats, tokens=19, options=cap).pages == (2,)  # type: ignore[union-attr]
    off = PagedOptions(active_pages=2, archive_batch=4, restore_max_tokens=0)
    planned = restore(request(7), made, stats, options=off)
    assert planned is not None and planned.pages == () and "last recalled 1 turn ago" in planned.text
    with pytest.raises(ValidationError):
        PagedOptions(restore_max_tokens=-1)
    assert PagedOptions().restore_max_tokens == 4000


def test_a_recall_of_a_longer_fork_is_not_restored_here() -> None:
    """Statistics are kept per page key (page number and prefix hash through it), so a fork that
    shares page 2 shares its statistics; a recall at a turn this request has not reached is the
    other branch's."""
    made = archived(6)
    assert restore(request(7), made, {2: RecallStat(1, 9)}) is not None
    assert restore(request(7), made, {2: RecallStat(1, 9)}).pages == ()  # type: ignore[union-attr]


def test_nothing_recalled_is_the_stored_checkpoint() -> None:
    made = archived(6)
    assert restore(request(7), made, {}) is None
    old = {1: RecallStat(1, 2)}  # recalled before the archival: shown by it already
    made_with = archived(6, stats=old)
    assert restore(request(8), made_with, old) is None


def test_system_messages_inside_a_page_are_not_restored_twice() -> None:
    """``assemble`` forwards a covered system message verbatim after the head already."""
    messages = request(6)
    messages.insert(span(2)[1], system("Deploys freeze on Fridays."))
    made = archive(messages, options=OPTIONS)[1].checkpoint
    later = [*messages, assistant("Done."), user("Question 7: and service-7?")]
    planned = restore(later, made, {2: RecallStat(1, 6)})
    assert planned is not None and planned.pages == (2,)
    assert [later[i]["role"] for i in planned.messages] == ["user", "assistant", "tool", "assistant"]
    forwarded = assemble(later, 1, made, "assistant_named", KINDS, [later[i] for i in planned.messages])
    assert sum(m.get("content") == "Deploys freeze on Fridays." for m in forwarded) == 1


def test_the_statistics_never_overflow_a_prompt_that_fits_without_them() -> None:
    made = archived(6)
    messages = request(7)
    exact = forwarded_tokens(messages, made)  # the prompt fills the window to the token
    assert restore(messages, made, {2: RecallStat(1, 6)}, window=exact) is None
